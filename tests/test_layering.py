"""ARCHITECTURE.md's layering rules, checked on the source (a static scan of every import, so a rule broken in
a branch no test runs is still caught)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "faultload"


def _imports(path: Path) -> list[str]:
    """faultload modules ``path`` imports at run time (imports under ``if TYPE_CHECKING:`` are left out)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out += [n for n in names if n.split(".")[0] == "faultload"]
    return out


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def _room(name: str) -> str:
    return ".".join(name.split(".")[:2])


SOURCES = sorted(PACKAGE.rglob("*.py"))
# room -> rooms it must never import (at run time)
FORBIDDEN = {
    "faultload.checker": ("faultload.trial", "faultload.stack", "faultload.router", "faultload.client",
                          "faultload.suite", "faultload.cli", "faultload.matrix", "faultload.targets"),
    "faultload.router": ("faultload.client", "faultload.checker", "faultload.suite", "faultload.stack",
                         "faultload.trial", "faultload.cli"),
    "faultload.client": ("faultload.checker", "faultload.suite", "faultload.stack", "faultload.trial",
                         "faultload.router", "faultload.cli"),
    "faultload.trial": ("faultload.suite", "faultload.cli", "faultload.matrix"),
    "faultload.stack": ("faultload.suite", "faultload.cli", "faultload.matrix", "faultload.checker"),
}
# module -> what it must never import (at run time): a stored trial is loaded, shown and judged again
# without the trial runner, the stack, the router, the client or Toxiproxy (faultload check)
OFFLINE = ("faultload.trial", "faultload.stack", "faultload.router", "faultload.client", "faultload.suite",
           "faultload.cli", "faultload.matrix", "faultload.targets", "faultload.faults.schedule",
           "faultload.faults.control", "faultload.faults.stack")
FORBIDDEN_MODULES = {"faultload.store.bundle": OFFLINE, "faultload.store.check": OFFLINE,
                     "faultload.store.report": OFFLINE}
INSIDE_THE_TARGET = ("faultload.targets.skyrl_patches", "faultload.targets.skyrl_launch")
# room -> the only rooms it may import (at run time): plain values import plain values
ONLY = {
    "faultload.model": ("faultload.model",),
    "faultload.strategies": ("faultload.model", "faultload.strategies"),
}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: _module(p))
def test_layering(path: Path) -> None:
    module, imports = _module(path), _imports(path)
    room = _room(module)
    broken = [name for name in imports if any(name == f or name.startswith(f + ".") for f in FORBIDDEN.get(room, ()))]
    assert not broken, f"{module} imports {broken[0]}: ARCHITECTURE.md forbids {room} -> {_room(broken[0])}"
    forbidden = FORBIDDEN_MODULES.get(module, ())
    broken = [name for name in imports if any(name == f or name.startswith(f + ".") for f in forbidden)]
    assert not broken, f"{module} imports {broken[0]}: ARCHITECTURE.md keeps a stored trial's loading offline"
    if room in ONLY:
        outside = [name for name in imports if _room(name) not in ONLY[room]]
        assert not outside, f"{module} imports {outside[0]}: ARCHITECTURE.md lets {room} import only {', '.join(ONLY[room])}"
    inside = [name for name in imports if name.startswith(INSIDE_THE_TARGET)]
    assert not inside, f"{module} imports {inside[0]}, code that runs inside the target's Python"
    if room != "faultload.suite" and module != "faultload.matrix":
        suite = [name for name in imports if name.startswith("faultload.suite")]
        assert not suite, f"{module} imports {suite[0]}: only the suite and the matrix use the suite"


def test_the_scan_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The scan itself: a checker module importing the trial runner is seen; one under TYPE_CHECKING is not."""
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nfrom faultload.trial import run_trial\n"
                   "if TYPE_CHECKING:\n    from faultload.suite.runner import SuiteRunner\n")
    assert _imports(src) == ["faultload.trial", "faultload.trial.run_trial"]


def test_plain_values_load_nothing_heavy() -> None:
    """``import faultload.model, faultload.strategies`` (what a property file or a spawned worker needs
    to build a TrialConfig) loads no HTTP stack, process library or Toxiproxy client."""
    code = ("import sys, faultload.model.codec, faultload.model.trial, faultload.strategies; "
            "print(' '.join(m for m in ('aiohttp', 'psutil', 'toxiproxy', 'requests', 'httpx', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == []
