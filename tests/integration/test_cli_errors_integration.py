"""Bad input to ``faultload run`` refused while setting up, end to end through a subprocess: these start real
components (the router, and the SkyRL server).

Each case must exit 2 with a one-line error (the first stderr line starting with "faultload" names what is wrong)
and leave nothing behind: no process (every process the CLI starts inherits a unique tag in its environment), no
directory under the workdir's runs/, no router log folder in TMPDIR. Input refused while parsing, before anything
starts, is in ``tests/unit/test_cli_errors.py`` (the ``cli`` fixture and ``assert_usage_error`` are the same there).

Runs use a private workdir whose ``targets`` is the real installed one.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from conftest import CliRun, leftover_dirs, named_processes_since, require_target, run_cli, tagged_processes, wait_until


@pytest.fixture
def cli(isolated_workdir: Path, tmp_path: Path):
    """Run the CLI with a private workdir and TMPDIR; afterwards check nothing is left behind."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    started = time.time()
    runs: list[CliRun] = []

    def call(*args: str, timeout_s: float = 240.0, prefix: list[str] | None = None) -> CliRun:
        result = run_cli(
            ["run", "--workdir", str(isolated_workdir), *args], timeout_s=timeout_s, tmpdir=tmpdir, prefix=prefix
        )
        runs.append(result)
        return result

    yield call
    for result in runs:
        left = wait_until(lambda: not tagged_processes(result.tag), timeout_s=15.0)
        assert left, f"processes left behind: {[p.cmdline() for p in tagged_processes(result.tag)]}"
    # The router and the SkyRL launcher by name, among processes carrying our tags.
    tags = {r.tag for r in runs}
    named = [line for line in named_processes_since(started, tags=tags)]
    assert not named, named
    assert leftover_dirs(isolated_workdir) == []
    assert not [p.name for p in tmpdir.iterdir() if p.name.startswith("faultload-router-")]


def assert_usage_error(result: CliRun, *needles: str, one_line: bool = True) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    line = result.error_line()
    assert line, f"no line starting with 'faultload' in stderr: {result.stderr[-2000:]!r}"
    for needle in needles:
        assert needle in line, (needle, line)
    if one_line:
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert lines == [line], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    return line


@pytest.mark.integration
def test_unreachable_url_target(cli):
    result = cli("--target", "url=http://127.0.0.1:1", "--quiet")
    assert_usage_error(result, "url=http://127.0.0.1:1", "no answer")


@pytest.mark.integration
def test_server_port_in_use(cli):
    require_target("0.4.0")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = cli("--target", "skyrl==0.4.0", "--server-port", str(port), "--requests", "10", "--quiet")
    assert_usage_error(result, f"port {port}", "in use")


@pytest.mark.integration
def test_uninstalled_release(cli):
    assert_usage_error(cli("--target", "skyrl==0.0.1", "--requests", "10", "--quiet"), "skyrl==0.0.1", "not installed")


@pytest.mark.integration
def test_target_that_fails_to_start_shows_its_log_tail(cli):
    """0.3.0 has no retrieved TTL setting: the launcher refuses it inside the server process."""
    require_target("0.3.0")
    result = cli("--target", "skyrl==0.3.0", "--retrieved-ttl", "5", "--requests", "10", "--quiet")
    line = assert_usage_error(result, "skyrl==0.3.0", "failed to start", one_line=False)
    assert line.startswith("faultload: ")
    tail = result.stderr[result.stderr.index(line) + len(line) :]
    assert "external_future_retrieved_ttl_sec" in tail
