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

import pytest
from conftest import assert_usage_error, require_target


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
