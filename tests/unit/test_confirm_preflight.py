"""`faultload confirm` fits itself to the machine: refuses under a low fd limit, before anything starts (it resizes
to what the limit holds in ``tests/integration/test_confirm_preflight_integration.py``).

The limit is lowered for a subprocess only (setrlimit in its preexec), as a
user's shell with a small `ulimit -n` would.
"""

from __future__ import annotations

from tests.conftest import leftover_dirs, run_with_nofile, tagged_processes


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
