"""scripts/module_sizes.py measures what the size rule (CONTRIBUTING.md) is stated in: module lines, function lines
without docstrings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "module_sizes.py"


def test_it_names_a_long_function_and_a_big_module_and_leaves_out_docstrings(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(5))
    doc = '    """' + "\n".join(["doc"] * 30) + '"""\n'
    (pkg / "m.py").write_text(
        f"def short():\n{doc}{body}\n\n\nclass C:\n    def long(self):\n"
        + "\n".join(f"        y{i} = {i}" for i in range(12))
        + "\n"
    )
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--modules", "10", "--functions", "10", str(pkg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "modules over 10 lines: 1" in out.stdout
    assert "functions over 10 lines (docstrings excluded): 1" in out.stdout
    assert f"   13  {pkg / 'm.py'}:C.long" in out.stdout  # def line + 12 body lines; short()'s docstring is not counted


def test_a_missing_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "nope")], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and out.stderr.strip() == f"module_sizes: no such folder: {tmp_path / 'nope'}"


def test_the_package_meets_the_rule_architecture_states() -> None:
    """No module over 400 lines, no function over 60 (ARCHITECTURE.md, "Sizes"): measured, not asserted in prose."""
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--modules", "400", "--functions", "60", str(ROOT / "faultload")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert (
        "modules over 400 lines: 0" in out.stdout and "functions over 60 lines (docstrings excluded): 0" in out.stdout
    ), out.stdout
