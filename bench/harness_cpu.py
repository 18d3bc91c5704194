"""How much CPU faultload itself spends per completed request, against the server's.

Runs the same trial N times (default: the 20,000-request, 2-worker run of the
trial-runner issue) and prints, per run and as medians:
- harness CPU per completed request: load workers (getrusage in each worker),
  router processes and the suite's own process (monitor threads, parent) —
  all read from /proc by psutil/getrusage, never from wall time;
- the server's CPU per completed request and its share of the machine
  (server CPU / (load seconds x cores));
- the harness's share of all CPU the trial consumed (target < 20%).

Usage: .faultload/venv/bin/python bench/harness_cpu.py [--repeat N] [faultload run args...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from _figures import cpu_per_request  # bench/, beside this script

from faultload.cli.from_args import config_from_args
from faultload.cli.parser import build_parser as _parser
from faultload.host.workspace import Workspace
from faultload.run.trial import run_trial
from faultload.store import report as report_mod

DEFAULT_ARGS = [
    "--requests",
    "20000",
    "--workers",
    "2",
    "--router-mode",
    "latency",
    "--gen-seconds",
    "2",
    "--max-num-seqs",
    "2048",
    "--quiet",
]


def one_run(run_args: list[str]) -> dict[str, float]:
    args = _parser().parse_args(["run", *run_args])
    result = run_trial(config_from_args(args), Workspace.default(os.environ.get("FAULTLOAD_HOME")))
    rep = report_mod.build_report(result)
    cpu = rep["cpu_s"]
    harness = cpu["harness_s"]
    server = cpu.get("server_s") or 0.0
    return {
        "completed": rep["completed"],
        "load_s": rep["load_s"],
        "router_peak_in_flight": rep["router"].get("peak_in_flight") or 0,
        **cpu_per_request(rep),
        "server_machine_share": server / (rep["load_s"] * (os.cpu_count() or 1)),
        "harness_share_of_trial": harness / (harness + server) if harness + server else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    known, rest = parser.parse_known_args()
    run_args = rest or DEFAULT_ARGS
    runs = [one_run(run_args) for _ in range(known.repeat)]
    keys = list(runs[0])
    print("run args:", " ".join(run_args))
    print(f"{'metric':<26}" + "".join(f"{'run ' + str(i + 1):>12}" for i in range(len(runs))) + f"{'median':>12}")
    for key in keys:
        values = [r[key] for r in runs]
        fmt = (lambda v: f"{v:>12.1%}") if "share" in key else (lambda v: f"{v:>12.3f}")
        print(f"{key:<26}" + "".join(fmt(v) for v in values) + fmt(statistics.median(values)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
