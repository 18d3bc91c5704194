"""The JSON report comes first: without matplotlib, `confirm --json-out` and `run --plot` still write it.

What is faked, and only that: the CLI runs under a ``-c`` wrapper that sets
``sys.modules['matplotlib'] = None`` before calling ``faultload.cli.main.main``, so
``import matplotlib`` raises ImportError exactly as on a machine without it
(the real server, router and load run as usual). Each run has a private
workdir and TMPDIR and must leave nothing behind.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import leftover_dirs, require_target, run_cli, tagged_processes, wait_until

pytestmark = pytest.mark.integration

WITHOUT_MATPLOTLIB = [
    "-c",
    textwrap.dedent(
        """
        import sys
        sys.modules["matplotlib"] = None  # `import matplotlib` now raises ImportError
        from faultload.cli.main import main
        sys.exit(main())
        """
    ),
]


def _run_without_matplotlib(args: list[str], workdir: Path, tmp_path: Path):
    require_target("0.4.0")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    result = run_cli(
        [*args, "--workdir", str(workdir), "--target", "skyrl==0.4.0"], tmpdir=tmpdir, prefix=WITHOUT_MATPLOTLIB
    )
    assert result.returncode in (0, 1), (result.returncode, result.stderr[-2000:])  # a judged trial, not an error
    assert "Traceback" not in result.stderr
    skipped = [line for line in result.stderr.splitlines() if "plot skipped" in line]
    assert len(skipped) == 1 and skipped[0].startswith("faultload: plot skipped: matplotlib"), result.stderr[-2000:]
    assert wait_until(lambda: not tagged_processes(result.tag), timeout_s=15.0)
    assert leftover_dirs(workdir) == []
    assert not [p.name for p in tmpdir.iterdir() if p.name.startswith("faultload-router-")]
    return result


def _assert_report(path: Path, requests: int) -> dict:
    report = json.loads(path.read_text())
    assert report["requested"] == requests
    assert "matplotlib" in report["plot_skipped"] and "plot_path" not in report
    return report


def test_confirm_writes_its_json_and_history_without_matplotlib(tmp_path: Path, isolated_workdir: Path):
    json_out = tmp_path / "confirm.json"
    _run_without_matplotlib(["confirm", "--requests", "64", "--json-out", str(json_out)], isolated_workdir, tmp_path)
    report = _assert_report(json_out, 64)
    assert Path(report["history_path"]) == tmp_path / "confirm-history.npz"
    assert (tmp_path / "confirm-history.npz").exists()
    assert not (tmp_path / "confirm.png").exists()


def test_run_with_plot_writes_its_json_without_matplotlib(tmp_path: Path, isolated_workdir: Path):
    json_out, png = tmp_path / "run.json", tmp_path / "run.png"
    _run_without_matplotlib(
        ["run", "--requests", "32", "--quiet", "--plot", str(png), "--json-out", str(json_out)],
        isolated_workdir,
        tmp_path,
    )
    _assert_report(json_out, 32)
    assert not png.exists()
