"""Load workers as actors on a real two-node Ray cluster started on this machine, against the real 0.4.0.

The cluster (``faultload.cluster.local.LocalCluster``) runs its nodes on
127.0.0.3 (head) and 127.0.0.2, never 127.0.0.1, which Ray would rewrite to
the machine's external address; every test checks no Ray process of it has
a connection outside 127.0.0.0/8.
"""

from __future__ import annotations

import ipaddress
import json
import signal
from pathlib import Path

import psutil
import pytest
from conftest import require_target, run_cli, wait_until
from test_interrupts import Started

pytestmark = pytest.mark.integration

LONG_RUN = [
    "--requests",
    "1500",
    "--router-mode",
    "latency",
    "--max-num-seqs",
    "64",
    "--gen-seconds",
    "1",
    "--max-outstanding",
    "512",
    "--time-scale",
    "0.1",
    "--max-wall",
    "120",
    "--workers",
    "2",
]
SAFETY = (
    "no_lost_results",
    "accepted_requests",
    "result_integrity",
    "retry_amplification",
    "unprovoked_resets",
    "clean_server_log",
    "no_collapse",
)


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("ray")
    from faultload.cluster.local import LocalCluster

    with LocalCluster(("127.0.0.3", "127.0.0.2")) as started:
        yield started


def _actors(cluster) -> list[psutil.Process]:
    out = []
    for proc in cluster.processes():
        try:
            if "LoadWorker" in " ".join(proc.cmdline()):
                out.append(proc)
        except psutil.NoSuchProcess:
            pass
    return out


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return (getattr(ip, "ipv4_mapped", None) or ip).is_loopback


def _off_loopback(cluster) -> list[str]:
    bad = []
    for proc in cluster.processes():
        try:
            for conn in proc.net_connections(kind="inet"):
                if conn.raddr and not _loopback(conn.raddr.ip):
                    bad.append(f"{proc.name()} -> {conn.raddr.ip}:{conn.raddr.port}")
        except psutil.NoSuchProcess:
            pass
    return bad


def _run(tmp_path: Path, workdir: Path, name: str, *args: str) -> dict:
    out = tmp_path / f"{name}.json"
    result = run_cli(["run", "--workdir", str(workdir), "--quiet", "--json-out", str(out), *args], timeout_s=300.0)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    return json.loads(out.read_text())


def test_a_trial_on_two_nodes_completes_and_holds_as_local_workers_do(cluster, isolated_workdir: Path, tmp_path: Path):
    # Local workers against Ray side by side, at 20,000 requests: bench/ray_ab.py (CI's time is kept for this).
    require_target("0.4.0")
    args = ["--requests", "1000", "--workers", "2", "--max-outstanding", "100", "--time-scale", "0.1"]
    on_ray = _run(tmp_path, isolated_workdir, "ray", *args, "--ray", cluster.address)
    assert on_ray["completed"] == on_ray["requested"] == 1000 and on_ray["error"] is None
    assert on_ray["attempts"]["http_attempts"] == 2000
    verdicts = {v["name"]: v["ok"] for v in on_ray["invariants"]}
    assert {n: verdicts[n] for n in SAFETY} == dict.fromkeys(SAFETY, True)
    workers = on_ray["workers"]
    assert sorted(w["node"] for w in workers) == ["127.0.0.2", "127.0.0.3"]
    assert [w["requests"] for w in workers] == [500, 500]
    assert all(w["clock_error_s"] < 0.05 and abs(w["clock_offset_s"]) < 0.05 for w in workers)
    assert _off_loopback(cluster) == []
    assert wait_until(lambda: not _actors(cluster), timeout_s=15.0), [p.cmdline() for p in _actors(cluster)]


def test_ctrl_c_mid_trial_leaves_no_actor(cluster, isolated_workdir: Path, tmp_path: Path):
    require_target("0.4.0")
    json_out = tmp_path / "report.json"
    run = Started(
        [
            "-m",
            "faultload.cli.main",
            "run",
            "--workdir",
            str(isolated_workdir),
            *LONG_RUN,
            "--ray",
            cluster.address,
            "--json-out",
            str(json_out),
        ],
        tmp_path,
    )
    assert wait_until(
        lambda: len(_actors(cluster)) == 2 and run.saw("in-flight") or run.proc.poll() is not None,
        timeout_s=240.0,
        every_s=0.2,
    ), run.stderr()
    assert wait_until(lambda: run.saw("completed") or run.proc.poll() is not None, timeout_s=60.0), run.stderr()
    assert run.proc.poll() is None, run.stderr()
    run.send(signal.SIGINT, group=True)
    assert run.wait() == 130, run.stderr()
    assert wait_until(lambda: not _actors(cluster), timeout_s=15.0), [p.cmdline() for p in _actors(cluster)]
    run.assert_nothing_left(isolated_workdir)
    report = json.loads(json_out.read_text())
    assert report["interrupted"] is True and {w["node"] for w in report["workers"]} == {"127.0.0.2", "127.0.0.3"}
    assert _off_loopback(cluster) == []


def test_a_killed_actor_makes_its_requests_unfinished_and_is_named(cluster, isolated_workdir: Path, tmp_path: Path):
    require_target("0.4.0")
    json_out = tmp_path / "report.json"
    run = Started(
        [
            "-m",
            "faultload.cli.main",
            "run",
            "--workdir",
            str(isolated_workdir),
            *LONG_RUN,
            "--ray",
            cluster.address,
            "--json-out",
            str(json_out),
        ],
        tmp_path,
    )
    assert wait_until(lambda: run.saw("completed") or run.proc.poll() is not None, timeout_s=240.0, every_s=0.2), (
        run.stderr()
    )
    actors = _actors(cluster)
    assert run.proc.poll() is None and len(actors) == 2, run.stderr()
    victim = actors[0]
    victim.kill()
    assert run.wait() == 3, run.stderr()  # the harness failed, not the server (cli.exits.EXIT_HARNESS)
    report = json.loads(json_out.read_text())
    dead = [w for w in report["workers"] if w["crashed"]]
    assert len(dead) == 1 and "the actor died" in dead[0]["crashed"] and dead[0]["node"] in ("127.0.0.2", "127.0.0.3")
    assert "load worker" in report["error"] and report["outcomes"]["pending"] >= 1
    assert report["completed"] + report["not_finished"] + report["failed"] == 1500
    assert wait_until(lambda: not _actors(cluster), timeout_s=15.0), [p.cmdline() for p in _actors(cluster)]
    run.assert_nothing_left(isolated_workdir)
    assert _off_loopback(cluster) == []


def test_matrix_rows_spread_one_per_node_at_once_in_row_order(cluster):
    # Stand-in rows (a harness test of the spreading itself): each "row" sleeps 3 s on its node and says where
    # and when. The real rows' equivalence with the sequential matrix is measured by `faultload matrix --ray`.
    import types

    from faultload.cli.cluster import join_rows_cluster
    from faultload.matrix.spread import spread_rows

    args = types.SimpleNamespace(ray=cluster.address, allow_remote=False, ray_environ={})
    joined = join_rows_cluster(args)
    try:

        def run_one(row):
            import socket as socket_mod
            import time as time_mod

            import ray as ray_mod

            started = time_mod.time()
            time_mod.sleep(3.0)
            node = ray_mod.util.get_node_ip_address()
            return types.SimpleNamespace(
                name=row.name,
                node=node,
                started=started,
                ended=time_mod.time(),
                shown=f"ran {row.name}",
                host=socket_mod.gethostname(),
            )

        rows = [types.SimpleNamespace(name=f"row{i}") for i in range(3)]
        lines: list[str] = []
        results = spread_rows(joined, rows, run_one, lines.append)
    finally:
        joined.close()
    assert [r.name for r in results] == ["row0", "row1", "row2"]
    assert {results[0].node, results[1].node} == {"127.0.0.2", "127.0.0.3"}
    assert results[1].started < results[0].ended and results[0].started < results[1].ended  # at once
    assert results[2].started >= min(results[0].ended, results[1].ended) - 0.5  # waited for a free node
    assert sum("on node" in line for line in lines) == 6


def test_the_suite_runs_its_trials_load_workers_on_the_cluster(cluster, isolated_workdir: Path, tmp_path: Path):
    require_target("0.4.0")
    summary = tmp_path / "summary.json"
    run = Started(
        [
            "-m",
            "pytest",
            "faultload",
            "-p",
            "no:cacheprovider",
            "-q",
            "--faultload-profile",
            "ci",
            "--faultload-target",
            "skyrl==0.4.0",
            "--faultload-workdir",
            str(isolated_workdir),
            "--faultload-examples",
            "2",
            "-k",
            "test_result_integrity",
            "--faultload-ray",
            cluster.address,
            "--faultload-summary-json",
            str(summary),
        ],
        tmp_path,
    )
    # Each trial starts its actors and ends them: seen while the session runs, none left after it.
    seen = wait_until(lambda: _actors(cluster) or run.proc.poll() is not None, timeout_s=240.0, every_s=0.05)
    assert run.wait() == 0, run.stderr() + run.stdout[-2000:]
    assert seen and not isinstance(seen, bool), "no LoadWorker actor ran during the session"
    data = json.loads(summary.read_text())
    assert data["judged_trials"] >= 1 and data["properties"][0]["outcome"] == "passed"
    assert wait_until(lambda: not _actors(cluster), timeout_s=15.0), [p.cmdline() for p in _actors(cluster)]
    run.assert_nothing_left(isolated_workdir)
    assert _off_loopback(cluster) == []
