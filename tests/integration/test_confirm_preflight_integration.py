"""`faultload confirm` resizes itself to what a low fd limit holds, against the real 0.4.0 server.

The limit is lowered for a subprocess only (setrlimit in its preexec), as a user's shell with a small `ulimit -n`
would. The refusals that start nothing are in ``tests/unit/test_confirm_preflight.py`` (``run_with_nofile`` is the
same there).
"""

from __future__ import annotations

import json

import pytest
from conftest import run_with_nofile

from tests.conftest import require_target, tagged_processes, wait_until


@pytest.mark.integration
def test_confirm_resizes_to_what_the_fd_limit_holds_and_says_so(tmp_path, isolated_workdir):
    require_target("0.4.0")
    out = tmp_path / "c.json"
    proc, tag = run_with_nofile(
        1024,
        [
            "--requests",
            "600",
            "--max-outstanding",
            "1000",
            "--gen-seconds",
            "0.2",
            "--workdir",
            str(isolated_workdir),
            "--json-out",
            str(out),
            "--quiet",
        ],
    )
    notes = [line for line in proc.stderr.splitlines() if line.startswith("faultload: preflight:")]
    assert any("outstanding capped at 307 (asked 600)" in n and "fd limit 1024" in n for n in notes), proc.stderr[
        -2000:
    ]
    report = json.loads(out.read_text())
    assert report["config"]["shape"]["max_outstanding"] == 307
    assert report["server"]["fd_limit"][0] == 1024
    assert report["completed"] == 600
    assert report["server"]["peak_fds"] < 1024
    assert (tmp_path / "c.png").exists() and (tmp_path / "c-history.npz").exists()
    assert wait_until(lambda: not tagged_processes(tag), 15.0)
