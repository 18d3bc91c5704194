"""ruff over the repository, with the rules ``[tool.ruff]`` selects (pyflakes' errors, import order): an undefined
name or an unused import is a test failure here, not a traceback in a user's run. It once found ``replay --html``
calling a function its module never imported. ``ruff format --check``: the layout is the formatter's. mypy
--strict (``[tool.mypy]``) over the values, the records and the checkers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run(
        [str(ruff), "check", "--no-cache", str(ROOT)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_ruff_format_would_change_nothing() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run(
        [str(ruff), "format", "--check", "--no-cache", str(ROOT)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_mypy_strict_finds_nothing_in_the_values_the_records_and_the_checkers(tmp_path) -> None:
    mypy = Path(sys.executable).with_name("mypy")
    packages = ["faultload/model", "faultload/record", "faultload/checker"]
    done = subprocess.run(
        [str(mypy), "--cache-dir", str(tmp_path / "cache"), *packages],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
