"""faultload's Go programs (the compiled router and client) held to Go's own tools, as the Python is to ruff and
mypy: ``gofmt -l`` lists nothing, ``go vet`` finds nothing, and their Go tests (the client's wire package: the
SDK's bodies, the result check) pass. Go is there whenever ``make test`` runs (setup builds both with it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from faultload.faults.toxiproxy import find_go

ROOT = Path(__file__).resolve().parents[2]
MODULES = [ROOT / "faultload" / "router" / "go", ROOT / "faultload" / "client" / "go"]


@pytest.fixture(scope="module")
def go() -> str:
    found = find_go(None)
    if found is None:
        pytest.skip("no Go toolchain: the Go programs' style is checked where Go is")
    return found


def _go(go: str, module: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([go, *args], cwd=module, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.parent.name)
def test_gofmt_lists_nothing(go: str, module: Path) -> None:
    gofmt = str(Path(go).with_name("gofmt"))
    done = subprocess.run([gofmt, "-l", "."], cwd=module, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.parent.name)
def test_go_vet_finds_nothing_and_the_go_tests_pass(go: str, module: Path) -> None:
    vet = _go(go, module, "vet", "./...")
    assert vet.returncode == 0, vet.stdout[-3000:] + vet.stderr[-3000:]
    tests = _go(go, module, "test", "-count=1", "./...")
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
