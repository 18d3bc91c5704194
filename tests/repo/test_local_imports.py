"""scripts/local_imports.py measures the rule "function-local imports <= 10 in all, each with a reason",
and the rule holds on faultload/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "local_imports.py"
LIMIT = 10


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_it_lists_each_local_import_with_its_reason_and_leaves_out_the_top(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        "import os\n\n\n"
        "def f():\n    import json  # local import: json is slow here\n\n\n"
        "class C:\n    async def g(self):\n        def inner():\n            from os import path\n        return inner\n"
    )
    out = _run(str(pkg))
    assert out.returncode == 0, out.stderr
    assert f"{pkg / 'm.py'}:5: import json  # json is slow here" in out.stdout
    assert f"{pkg / 'm.py'}:11: from os import path  # no reason" in out.stdout
    assert out.stdout.splitlines()[-1] == "2 function-local imports (limit 10); 1 without a reason"


def test_a_missing_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out = _run(str(tmp_path / "nope"))
    assert out.returncode == 2 and out.stderr.strip() == f"local_imports: no such folder: {tmp_path / 'nope'}"


def test_faultload_has_at_most_ten_and_each_says_why() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import local_imports
    finally:
        sys.path.remove(str(SCRIPT.parent))
    found = local_imports.measure([ROOT / "faultload"])
    listing = "\n".join(f"{i.path}:{i.line}: {i.statement}  # {i.reason or 'no reason'}" for i in found)
    assert len(found) <= LIMIT, f"{len(found)} function-local imports (limit {LIMIT}):\n{listing}"
    assert all(i.reason for i in found), f"each needs a '# local import: <reason>' comment:\n{listing}"
