"""``faultload conformance`` end to end: real targets launched, real trials, the table written three ways."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import leftover_dirs, require_target, run_cli

pytestmark = pytest.mark.integration


def test_the_table_says_which_rule_each_family_keeps_with_a_repro_for_each_broken_one(
    tmp_path: Path, isolated_workdir: Path
):
    """Two rows on SkyRL 0.4.0 and hatchery-core 0.3.0: hatchery's session row is broken (finding 11; its repro is
    the one command) and, with the session fix given, its backend-failure row kept; SkyRL keeps both. Exit 1."""
    require_target("0.4.0")
    require_target("0.3.0", "hatchery")
    out = tmp_path / "table"
    run = run_cli(
        [
            "conformance",
            "--workdir",
            str(isolated_workdir),
            "--targets",
            "skyrl==0.4.0,hatchery==0.3.0",
            "--rules",
            "sdk_opens_a_sampling_session,definite_error_after_backend_failure",
            "--fix",
            "sampling-session-answer",
            "--json-out",
            f"{out}.json",
            "--markdown-out",
            f"{out}.md",
            "--html",
            f"{out}.html",
        ],
        timeout_s=600.0,
        tmpdir=tmp_path,
    )
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    cells = {(c["target"], c["rule"]): c for c in json.loads(Path(f"{out}.json").read_text())["cells"]}
    assert {key: c["status"] for key, c in cells.items()} == {
        ("skyrl==0.4.0", "sdk_opens_a_sampling_session"): "kept",
        ("skyrl==0.4.0", "definite_error_after_backend_failure"): "kept",
        ("hatchery==0.3.0", "sdk_opens_a_sampling_session"): "broken",
        ("hatchery==0.3.0", "definite_error_after_backend_failure"): "kept",
    }
    assert cells[("hatchery==0.3.0", "sdk_opens_a_sampling_session")]["repro"].startswith("faultload run --target")
    assert "| kept | **broken** |" in Path(f"{out}.md").read_text()
    assert Path(f"{out}.html").read_text().count("<tr>") == 3
    assert leftover_dirs(isolated_workdir) == []
