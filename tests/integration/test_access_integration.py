"""Reaching a deployed server with its API key, extra headers and TLS, against a real key-checking server.

TuFT 0.2.2 (which refuses any key but the ones its config authorizes) behind stunnel (a TLS-terminating proxy,
Debian's stunnel4), with a CA and certificate made by trustme for the test. The key is a secret: never in a report,
a bundle, a log or a line the CLI prints. The values themselves are checked in ``tests/unit/test_access.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from faultload.model.sdk import SDK_API_KEY
from faultload.model.target import parse_target
from tests.conftest import TARGETS, require_built, require_target, run_cli, wait_until

KEY = "tml-faultload-test-secret-7f3a"


def _stunnel(tmp_path: Path, ca, accept: int, connect: int) -> subprocess.Popen:
    cert = ca.issue_cert("127.0.0.1")
    pem, key = tmp_path / "server.pem", tmp_path / "server.key"
    cert.cert_chain_pems[0].write_to_path(str(pem))
    cert.private_key_pem.write_to_path(str(key))
    conf = tmp_path / "stunnel.conf"
    conf.write_text(
        f"foreground = yes\npid =\noutput = {tmp_path / 'stunnel.log'}\n[tinker]\n"
        f"accept = 127.0.0.1:{accept}\nconnect = 127.0.0.1:{connect}\ncert = {pem}\nkey = {key}\n"
    )
    return subprocess.Popen(
        [shutil.which("stunnel4") or "stunnel4", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _asamples(log: Path) -> int:
    return log.read_text(errors="replace").count("/api/v1/asample") if log.exists() else 0


@dataclass
class TlsServer:
    target: str  # tuft+url=https://127.0.0.1:PORT
    ca_pem: Path
    log: Path  # the server's own log (its access log names each asample)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory) -> Iterator[TlsServer]:
    """TuFT 0.2.2 authorizing only ``KEY``, behind stunnel (TLS, a trustme CA), forwarding to faultload's router."""
    require_target("0.2.2", "tuft")
    require_built("stunnel4 (a TLS-terminating proxy)", shutil.which("stunnel4") is not None, "make test")
    trustme = pytest.importorskip("trustme")
    from faultload.host.network import pick_free_port, port_is_free
    from faultload.model.router import RouterConfig
    from faultload.router.handle import start_router
    from faultload.targets import install
    from faultload.targets.families.tuft import launch_tuft

    tmp_path = tmp_path_factory.mktemp("tls")
    spec = parse_target("tuft==0.2.2")
    ca = trustme.CA()
    ca_pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    served = tmp_path / "tuft"
    served.mkdir()
    with start_router(RouterConfig(mode="immediate")) as router:
        port = pick_free_port()
        server = launch_tuft(
            spec, install.target_python(TARGETS, spec), served, port, router.url, time_scale=0.05, api_key=KEY
        )
        tls_port = pick_free_port(exclude=frozenset({port}))
        tunnel = _stunnel(tmp_path, ca, tls_port, port)
        try:
            assert wait_until(lambda: not port_is_free("127.0.0.1", tls_port), timeout_s=20)
            assert server.log_path is not None
            yield TlsServer(f"tuft+url=https://127.0.0.1:{tls_port}", ca_pem, server.log_path)
        finally:
            tunnel.terminate()
            tunnel.wait(timeout=10)
            server.stop()


@pytest.mark.integration
def test_a_key_checking_tls_server_is_judged_with_its_key_and_refused_in_one_line_without(
    tls_server: TlsServer, tmp_path: Path, isolated_workdir: Path
) -> None:
    (tmp_path / "tmp").mkdir()
    common = [
        "run",
        "--target",
        tls_server.target,
        "--ca-cert",
        str(tls_server.ca_pem),
        "--requests",
        "8",
        "--time-scale",
        "0.05",
        "--max-wall",
        "60",
        "--workdir",
        str(isolated_workdir),
    ]
    out, bundle = tmp_path / "report.json", tmp_path / "bundle"
    right = run_cli(
        [*common, "--api-key", KEY, "--json-out", str(out), "--bundle", str(bundle), "--header", "X-Team: faultload"],
        timeout_s=300,
        tmpdir=tmp_path,
    )
    report = json.loads(out.read_text())
    assert report["completed"] == 8, right.stderr[-2000:]
    assert right.returncode in (0, 1) and report["invariants"]  # judged: a verdict either way
    before = _asamples(tls_server.log)
    assert before >= 8  # the server's access log names each asample: a count that can move
    wrong = run_cli([*common, "--api-key", "tml-wrong-key"], timeout_s=300, tmpdir=tmp_path)
    lines = [line for line in wrong.stderr.splitlines() if line.startswith("faultload")]
    assert wrong.returncode == 2 and len(lines) == 1 and "refused the API key (HTTP 40" in lines[0], wrong.stderr
    assert _asamples(tls_server.log) == before  # no load was sent
    # the key: nowhere in what the runs wrote or printed
    written = [out, *bundle.rglob("*"), *isolated_workdir.rglob("*"), *(tmp_path / "tmp").rglob("*")]
    texts = [p.read_bytes() for p in written if p.is_file() and not p.is_symlink() and "targets" not in p.parts]
    assert texts and not any(KEY.encode() in t for t in texts)
    for run in (right, wrong):
        assert KEY not in run.stdout and KEY not in run.stderr
    assert SDK_API_KEY != KEY


@pytest.mark.integration
def test_the_suite_reaches_it_with_the_key_from_the_environment(
    tls_server: TlsServer, tmp_path: Path, isolated_workdir: Path
) -> None:
    """``TINKER_API_KEY`` as the tinker SDK reads it: one property's ci session judges the server through TLS."""
    summary = tmp_path / "summary.json"
    run = run_cli(
        [
            "faultload/suite",
            "-p",
            "no:cacheprovider",
            "-q",
            "--faultload-profile",
            "ci",
            "--faultload-target",
            tls_server.target,
            "--faultload-ca-cert",
            str(tls_server.ca_pem),
            "--faultload-workdir",
            str(isolated_workdir),
            "--faultload-summary-json",
            str(summary),
            "-k",
            "test_result_integrity",
            "--faultload-examples",
            "2",
        ],
        timeout_s=600,
        prefix=["-m", "pytest"],
        env={"TINKER_API_KEY": KEY},
    )
    data = json.loads(summary.read_text())
    (prop,) = [p for p in data["properties"] if p["name"] == "test_result_integrity"]
    assert prop["judged_trials"] >= 1 and prop["error"] is None, run.stdout[-3000:]
    assert KEY not in run.stdout and KEY not in summary.read_text()
