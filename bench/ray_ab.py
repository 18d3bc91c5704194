"""Load workers as local processes vs as Ray actors, the same `faultload run` trial, side by side.

Starts a two-node Ray cluster on this machine (127.0.0.3 head, 127.0.0.2;
``faultload.cluster.local.LocalCluster``), then runs the trial from this
checkout alternately with local workers (A) and with ``--ray`` (B), A B B A
..., ``--repeat`` times each, and prints per side the median and spread of
wall, load, and harness CPU per completed request by role (from each trial's
JSON report), plus for B the CPU the cluster's own processes (GCS, raylets,
agents: everything of the cluster but the actors, which the report counts as
workers) spent during the trial, read from /proc before and after. Counts
and verdicts of every trial are printed too, so "the same counts and
invariants" is read off the same run.

Usage: .faultload/venv/bin/python bench/ray_ab.py [--repeat N] [-- RUN_ARGS...]
(default RUN_ARGS: --requests 20000 --workers 2)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import psutil
from harness_ab import one_trial, print_table  # bench/, beside this script

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from faultload.cluster.local import LocalCluster  # noqa: E402  (this checkout, after the path)


def cluster_cpu_s(cluster: LocalCluster) -> dict[int, float]:
    out = {}
    for proc in cluster.processes():
        try:
            times = proc.cpu_times()
            out[proc.pid] = times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--home", default=str(ROOT / ".faultload"))
    parser.add_argument("run_args", nargs="*")
    args = parser.parse_args()
    run_args = args.run_args or ["--requests", "20000", "--workers", "2"]
    runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    with LocalCluster(("127.0.0.3", "127.0.0.2")) as cluster, tempfile.TemporaryDirectory(prefix="ray-ab-") as tmp:
        for i in range(args.repeat):
            for side in (("A", "B"), ("B", "A"))[i % 2]:
                extra = ["--ray", cluster.address] if side == "B" else []
                before = cluster_cpu_s(cluster)
                out = Path(tmp) / "r.json"
                figures = one_trial(ROOT, run_args + extra, args.home, out)
                after = cluster_cpu_s(cluster)
                report = json.loads(out.read_text())
                ray_s = sum(after[p] - before[p] for p in after if p in before)
                figures["ray_system_ms_per_req"] = 1000 * ray_s / max(report["completed"], 1) if side == "B" else 0.0
                figures["harness_with_ray_ms_per_req"] = (
                    figures["harness_ms_per_req"] + figures["ray_system_ms_per_req"]
                )
                runs[side].append(figures)
                verdicts = " ".join(f"{v['name']}={v['ok']}" for v in report["invariants"])
                nodes = sorted({w["node"] for w in report["workers"]})
                print(
                    f"  {side} {i + 1}/{args.repeat}: completed {report['completed']}/{report['requested']}, "
                    f"attempts {report['attempts']['http_attempts']}, nodes {nodes}, {verdicts}",
                    file=sys.stderr,
                )
    print(f"run args: {' '.join(run_args)}; A = local workers, B = --ray (2 loopback nodes); {args.repeat} each, ABBA")
    print_table(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
