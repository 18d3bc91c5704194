"""The Ray placement's pure parts: addresses, placement, limits, a dead worker's rows; and --ray without Ray.

No cluster here (tests/integration/test_ray_integration.py has the real one). ``Node``
values are built by hand; the "no ray" case hides Ray behind a stand-in
package that fails to import, as an environment without the extra would.
"""

from __future__ import annotations

import os

import pytest
from conftest import run_cli

from faultload.client.job import WorkerJob
from faultload.cluster.connect import ClusterError, connect, resolve_address
from faultload.cluster.nodes import Node, cluster_limits, per_node, place
from faultload.cluster.pool import unfinished_result
from faultload.model.shape import LoadShape
from faultload.record.history import Outcome

LIMITS = {"nofile_soft": 1024, "nofile_hard": 20000, "somaxconn": 4096, "ephemeral_ports": 28232}


def _job(worker: int, first: int = 0, count: int = 10) -> WorkerJob:
    return WorkerJob(
        worker=worker,
        base_url="http://127.0.0.1:1",
        source_ip=f"127.0.1.{worker + 1}",
        sampling_session_id="s",
        base_model="m",
        first=first,
        count=count,
        nonce_salt=7,
        shape=LoadShape(),
        t0=0.0,
        deadline_s=10.0,
    )


def _node(address: str, **limits: int) -> Node:
    return Node(f"id-{address}", address, {**LIMITS, **limits}, "1.0")


@pytest.mark.parametrize(
    "address, message",
    [
        ("auto", "RAY_ADDRESS is not set"),
        ("ray://127.0.0.3:10001", "ray:// clients are not supported"),
        ("127.0.0.3", "expected HOST:PORT"),
        ("127.0.0.3:0", "expected HOST:PORT"),
        ("127.0.0.3:http", "expected HOST:PORT"),
    ],
)
def test_bad_addresses_are_named(address: str, message: str):
    with pytest.raises(ClusterError, match=message):
        resolve_address(address, {})


def test_auto_reads_ray_address():
    assert resolve_address("auto", {"RAY_ADDRESS": "127.0.0.3:26379"}) == "127.0.0.3:26379"


@pytest.mark.parametrize(
    "address, message",
    [
        ("10.1.2.3:6379", "not a loopback address"),
        ("127.0.0.1:6379", "Ray rewrites 127.0.0.1/localhost"),
        ("localhost:6379", "Ray rewrites 127.0.0.1/localhost"),
    ],
)
def test_connect_refuses_what_leaves_loopback_before_importing_ray(address: str, message: str):
    with pytest.raises(ClusterError, match=message):
        connect(address, allow_remote=False, environ={})


def test_jobs_go_round_robin_and_keep_their_loopback_source_addresses():
    nodes = [_node("127.0.0.2"), _node("127.0.0.3")]
    placed = place([_job(i) for i in range(5)], nodes, target_loopback=True)
    assert [n.address for _, n in placed] == ["127.0.0.2", "127.0.0.3"] * 2 + ["127.0.0.2"]
    assert [j.source_ip for j, _ in placed] == [f"127.0.1.{i + 1}" for i in range(5)]
    assert per_node(placed) == {"127.0.0.2": 3, "127.0.0.3": 2}


def test_a_node_off_loopback_binds_its_own_address_and_cannot_reach_a_loopback_target():
    nodes = [_node("127.0.0.2"), _node("10.0.0.7")]
    with pytest.raises(ClusterError, match="node 10.0.0.7 is not on loopback"):
        place([_job(0), _job(1)], nodes, target_loopback=True)
    placed = place([_job(0), _job(1)], nodes, target_loopback=False)
    assert [j.source_ip for j, _ in placed] == ["127.0.1.1", "10.0.0.7"]


def test_the_cluster_plans_with_its_smallest_node_and_the_server_machine_s_own_limits():
    nodes = [_node("127.0.0.2", nofile_hard=4096), _node("127.0.0.3", ephemeral_ports=1000)]
    limits = cluster_limits(nodes, {**LIMITS, "nofile_soft": 9999})
    assert limits == {**LIMITS, "nofile_soft": 9999, "nofile_hard": 4096, "ephemeral_ports": 1000}


def test_a_dead_worker_hands_back_its_requests_unfinished_never_accepted():
    job = _job(3, first=20, count=4)
    result = unfinished_result(job, "on node 127.0.0.2: the actor died")
    h = result.history
    assert len(h) == 4 and result.crashed.startswith("on node 127.0.0.2")
    assert list(h["nonce"]) == [job.nonce(i) for i in range(20, 24)]
    assert set(h["worker"]) == {3} and set(h["outcome"]) == {Outcome.PENDING} and set(h["server_id"]) == {0}
    assert result.address == "127.0.1.4"


def test_ray_missing_is_one_line_with_the_install_command(tmp_path):
    # A stand-in "ray" that fails to import, first on the path: what a harness without the extra sees.
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text("raise ImportError('No module named ray (stand-in)')\n")
    import socket

    with socket.socket() as listener:  # something answers at the address, so the check gets to the import
        listener.bind(("127.0.0.3", 0))
        listener.listen()
        port = listener.getsockname()[1]
        result = run_cli(
            ["run", "--ray", f"127.0.0.3:{port}", "--requests", "4"],
            timeout_s=60.0,
            prefix=[
                "-c",
                f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
                "from faultload.cli.main import main; sys.exit(main())",
            ],
        )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'faultload[ray]'" in lines[0], result.stderr


def test_no_cluster_at_the_address_is_one_line(tmp_path):
    result = run_cli(["run", "--ray", "127.0.0.3:9", "--requests", "4"], timeout_s=60.0)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Ray cluster answers there" in lines[0], result.stderr


@pytest.mark.parametrize(
    "address, message",
    [
        ("127.0.0.3:9", "--faultload-ray 127.0.0.3:9: no Ray cluster answers there"),
        ("auto", "--faultload-ray auto: RAY_ADDRESS is not set"),
    ],
)
def test_the_suite_refuses_a_cluster_it_cannot_use_before_any_trial(address: str, message: str, tmp_path):
    import subprocess
    import sys

    from conftest import ROOT

    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "faultload",
            "-p",
            "no:cacheprovider",
            "-q",
            "--faultload-ray",
            address,
            "--faultload-workdir",
            str(tmp_path / "fl"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]  # pytest's usage error
    assert message in proc.stderr, proc.stderr
    assert not (tmp_path / "fl").exists()  # nothing started, nothing written
