"""Two faultload checkouts, the same `faultload run` trial, side by side: where the harness's time and CPU go.

Runs ``faultload run RUN_ARGS --json-out`` from checkout A and checkout B
(each with its own ``PYTHONPATH``, one shared workspace), interleaved A B B A
... so drift on a shared machine moves both alike, ``--repeat`` times each, and
prints per checkout the median and spread ((max - min) / median) of:

- the trial's wall, its load, their ratio, and each phase (``phases_s``);
- harness CPU per completed request by role: load workers (getrusage in each
  worker, start-up included; ``workers_startup`` is the part before they were
  ready, NaN for a checkout that does not report it), router processes, and the parent (monitor,
  watchdog, fault control); and the server's CPU per request;

and /healthz p99 (the server's responsiveness under that load); then B/A of
each median. ``--a-args``/``--b-args`` add run arguments to one side only, so
one checkout can be compared with itself under two settings (e.g. ``--b .
--a . --a-args "--engine sleeper" --b-args "--engine null"``). The numbers come from each trial's JSON report, which
reads CPU from /proc and getrusage, never from wall time.

Usage: .faultload/venv/bin/python bench/harness_ab.py --a PATH --b PATH [--a-args ARGS] [--b-args ARGS]
[--repeat N] [-- RUN_ARGS...]
(default RUN_ARGS: none, i.e. `make run`'s trial; e.g. `-- --requests 4096 --router-mode barrier
--max-outstanding 0` for the reference harness's burst)
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _figures import abba, checkouts_parser, cpu_per_request  # bench/, beside this script

ROOT = Path(__file__).resolve().parent.parent


def figures(report: dict[str, Any]) -> dict[str, float]:
    """The figures compared, from one trial's JSON report: wall, load, phases, CPU per request by role."""
    wall, load = report["wall_s"], report["load_s"]
    out = {"wall_s": wall, "load_s": load, "wall_per_load": wall / load if load else float("inf")}
    out.update({f"phase_{k}_s": v for k, v in report["phases_s"].items()})
    out.update(cpu_per_request(report))
    out["healthz_p99_s"] = report["server"]["healthz_latency_s"]["p99"] or float("nan")
    return out


def one_trial(checkout: Path, run_args: list[str], home: str, out: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "FAULTLOAD_HOME": home}
    cmd = [sys.executable, "-m", "faultload", "run", *run_args, "--quiet", "--json-out", str(out)]
    proc = subprocess.run(cmd, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode not in (0, 1):  # 1: an invariant failed, the figures are still measured
        raise SystemExit(f"harness_ab: {checkout}: faultload run exited {proc.returncode}: {proc.stderr[-500:]}")
    return figures(json.loads(out.read_text()))


def spread(values: list[float]) -> float:
    median = statistics.median(values)
    return (max(values) - min(values)) / median if median else 0.0


def main() -> int:
    parser = checkouts_parser(__doc__.splitlines()[0], repeat=3)
    parser.add_argument("--a-args", default="", help="run arguments for A only (one shell-quoted string)")
    parser.add_argument("--b-args", default="", help="run arguments for B only (one shell-quoted string)")
    parser.add_argument("--home", default=str(ROOT / ".faultload"), help="the workspace both use")
    parser.add_argument("run_args", nargs="*")
    args = parser.parse_args()
    for path in (args.a, args.b):
        if not (path / "faultload" / "__init__.py").is_file():
            print(f"harness_ab: {path} is not a faultload checkout", file=sys.stderr)
            return 2
    if args.repeat < 1:
        print("harness_ab: --repeat must be >= 1", file=sys.stderr)
        return 2
    extra = {"A": shlex.split(args.a_args), "B": shlex.split(args.b_args)}
    with tempfile.TemporaryDirectory(prefix="harness-ab-") as tmp:

        def run(side: str) -> dict[str, float]:
            checkout = args.a if side == "A" else args.b
            figures = one_trial(checkout.resolve(), args.run_args + extra[side], args.home, Path(tmp) / "r.json")
            print(f"  {side}: wall {figures['wall_s']:.1f} s", file=sys.stderr)
            return figures

        runs = abba(args.repeat, run)
    print(
        f"A = {args.a} {args.a_args}\nB = {args.b} {args.b_args}\nrun args: {' '.join(args.run_args) or '(make run)'}; {args.repeat} each, ABBA"
    )
    print_table(runs)
    return 0


def print_table(runs: dict[str, list[dict[str, float]]], width: int = 28) -> None:
    """Per figure: A's and B's median and spread, and B/A of the medians."""
    print(f"{'figure':<{width}}{'A median':>10}{'A spread':>10}{'B median':>10}{'B spread':>10}{'B/A':>8}")
    for key in runs["A"][0]:
        a = [r[key] for r in runs["A"]]
        b = [r.get(key, 0.0) for r in runs["B"]]
        ma, mb = statistics.median(a), statistics.median(b)
        ratio = f"{mb / ma:8.2f}" if ma else f"{'-':>8}"
        print(f"{key:<{width}}{ma:>10.3f}{spread(a):>10.0%}{mb:>10.3f}{spread(b):>10.0%}{ratio}")


if __name__ == "__main__":
    sys.exit(main())
