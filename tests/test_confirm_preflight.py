"""`faultload confirm` fits itself to the machine: refuses or resizes under a low fd limit.

The limit is lowered for a subprocess only (setrlimit in its preexec), as a
user's shell with a small `ulimit -n` would.
"""

from __future__ import annotations

import json
import resource
import subprocess
import uuid

import pytest

from tests.conftest import ROOT, cli_env, leftover_dirs, python_exe, require_target, tagged_processes, wait_until


def run_with_nofile(limit: int, args: list[str], timeout_s: float = 600) -> tuple[subprocess.CompletedProcess, str]:
    tag = uuid.uuid4().hex

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    proc = subprocess.run(
        [python_exe(), "-m", "faultload.cli.main", "confirm", *args],
        cwd=ROOT,
        env=cli_env(tag),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
        preexec_fn=lower,
    )
    return proc, tag


def test_confirm_refuses_a_machine_where_nothing_fits(isolated_workdir):
    proc, tag = run_with_nofile(200, ["--workdir", str(isolated_workdir), "--quiet"])
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("faultload")]
    assert len(errors) == 1 and "does not fit" in errors[0] and "200" in errors[0] and "ulimit" in errors[0]
    assert not tagged_processes(tag)
    assert leftover_dirs(isolated_workdir) == []


def test_confirm_refuses_an_output_in_a_missing_folder_before_its_preflight(tmp_path, isolated_workdir):
    missing = tmp_path / "no-such-folder"
    proc, tag = run_with_nofile(
        20_000, ["--workdir", str(isolated_workdir), "--quiet", "--json-out", str(missing / "c.json")]
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [f"faultload: error: --json-out: no such directory: {missing}"], proc.stderr
    assert not missing.exists() and not tagged_processes(tag)
    assert leftover_dirs(isolated_workdir) == []


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
