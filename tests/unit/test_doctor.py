"""``faultload doctor`` through a subprocess, on a machine without Go.

Go is made absent honestly for the process: PATH keeps no directory holding a
``go`` binary, and ``GO`` (which doctor and ``faultload setup`` read
first) names a file that does not exist, so the /usr/local/go fallback is not
taken either. Toxiproxy is the real one: the checkout's built binary (tools/
symlinked into a private workdir) or none (an empty workdir). The target is a
url= one, which doctor does not check, so the exit code depends on Go and
Toxiproxy (and the machine limits, which the assertions read from the output).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import ROOT, WORKDIR, cli_env, python_exe, require_built


def _env_without_go(tmp_path: Path) -> dict[str, str]:
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "go").exists()]
    return {"PATH": os.pathsep.join(dirs), "GO": str(tmp_path / "no-go")}


def _doctor(tmp_path: Path, workdir: Path) -> tuple[int, list[str]]:
    env = {**cli_env(uuid.uuid4().hex), **_env_without_go(tmp_path)}
    result = subprocess.run(
        [
            python_exe(),
            "-m",
            "faultload.cli.main",
            "doctor",
            "--workdir",
            str(workdir),
            "--target",
            "url=http://127.0.0.1:1",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout.splitlines()


def _line(lines: list[str], name: str) -> str:
    found = [line for line in lines if f"] {name}:" in line]
    assert len(found) == 1, lines
    return found[0]


def test_go_missing_is_a_warning_when_toxiproxy_is_built(tmp_path: Path) -> None:
    require_built(
        "toxiproxy-server (in .faultload/tools)", (WORKDIR / "tools" / "toxiproxy-server").exists(), "make setup"
    )
    workdir = tmp_path / "fl"
    workdir.mkdir()
    (workdir / "tools").symlink_to(WORKDIR / "tools", target_is_directory=True)
    code, lines = _doctor(tmp_path, workdir)
    assert _line(lines, "toxiproxy").startswith("[ok  ]")
    assert _line(lines, "compiled router").startswith("[ok  ]")  # make test's setup built it before toxiproxy
    go = _line(lines, "go toolchain")
    assert go.startswith("[warn ]") and "not found" in go and "nothing to do" in go
    short = [line for line in lines if line.startswith("[SHORT]")]
    assert code == (2 if short else 0), (code, lines)  # only a real shortage (machine limits) makes it 2


def test_go_missing_is_an_error_when_toxiproxy_is_not_built(tmp_path: Path) -> None:
    if shutil.which("toxiproxy-server", path=_env_without_go(tmp_path)["PATH"]):
        pytest.skip("a toxiproxy-server on PATH: this machine cannot lack it")
    workdir = tmp_path / "fl"
    workdir.mkdir()
    code, lines = _doctor(tmp_path, workdir)
    assert _line(lines, "toxiproxy").startswith("[SHORT]")
    assert "no `go` to build it" in _line(lines, "toxiproxy")
    assert _line(lines, "compiled router").startswith("[SHORT]") and "faultload setup" in _line(
        lines, "compiled router"
    )
    assert _line(lines, "go toolchain").startswith("[SHORT]")
    assert code == 2
