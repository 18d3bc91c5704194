"""Server CPU per HTTP request, side by side: a clean target and the same with regression switches (or another target).

Calibrates the ``bounded_cpu`` budget (``server_cpu_ms_per_request``): runs the
same ``faultload run`` trial against the clean target and with ``--regress``
switches (default ``rich-access-log``), or with ``--against ARGS`` appended
instead (``--against "--target tuft==0.2.2"``: one family beside another),
alternating (clean,other / other,clean / ...) N times each, each on a fresh stack. Per trial it
prints the server's CPU (its own /proc counters over the trial, as the
monitor samples them) per HTTP request it answered (the client's attempts
plus the monitor's /healthz probes) and per completed sample; then the
medians per mode and the median of the per-repeat ratios. The machine is
shared and noisy: CPU time is steadier than wall time, but read the medians.

Usage: .faultload/venv/bin/python bench/server_cpu.py [--repeats N] [--regress NAME ... | --against ARGS] [faultload run args...]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _trial import checked, fresh_stack  # noqa: E402

from faultload.checker.resources import server_http_requests  # noqa: E402
from faultload.host.workspace import Workspace  # noqa: E402
from faultload.run.trial import run_trial  # noqa: E402
from faultload.store import report as report_mod  # noqa: E402


def one_trial(run_args: list[str], mode: list[str], workspace: Workspace) -> dict[str, Any]:
    with fresh_stack([*run_args, *mode], workspace) as (config, stack):
        result = checked(run_trial(config, workspace, stack=stack))
    rep = report_mod.build_report(result)
    server_s = result.cpu.get("server_s") or 0.0
    http = server_http_requests(result.history, result.monitor)
    return {
        "mode": " ".join(mode).replace("--regress ", "").replace("--target ", "") or "clean",
        "completed": rep["completed"],
        "http": http,
        "ms_per_http": 1000 * server_s / max(http, 1),
        "ms_per_sample": 1000 * server_s / max(rep["completed"], 1),
        "throughput": rep["throughput_per_s"],
    }


def _row(label: str, r: dict[str, Any]) -> str:
    return (
        f"{label:<8}{r['mode']:>18}  {r['ms_per_http']:>9.3f}  {r['ms_per_sample']:>10.3f}  "
        f"{r['throughput']:>8.0f}  {r['http']:>7}  {r['completed']:>7}"
    )


HEADER = f"{'':<8}{'mode':>18}  {'ms/http':>9}  {'ms/sample':>10}  {'req/s':>8}  {'http':>7}  {'done':>7}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--regress", action="append", default=None)
    parser.add_argument("--against", default=None, help="faultload run arguments of the other mode")
    known, rest = parser.parse_known_args()
    if known.repeats < 1:
        parser.error("--repeats must be >= 1")
    if known.regress and known.against:
        parser.error("--regress and --against are two ways to name the other mode: give one")
    other = (
        shlex.split(known.against)
        if known.against
        else [arg for name in known.regress or ["rich-access-log"] for arg in ("--regress", name)]
    )
    modes: tuple[list[str], list[str]] = ([], other)
    workspace = Workspace.default(os.environ.get("FAULTLOAD_HOME"))
    print("faultload run", " ".join(rest), "| as given vs with", " ".join(other), "x", known.repeats, flush=True)
    print(HEADER, flush=True)
    runs: list[list[dict[str, Any]]] = [[], []]
    for i in range(known.repeats):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for m in order:
            r = one_trial(rest, modes[m], workspace)
            runs[m].append(r)
            print(_row(f"run {i + 1}", r), flush=True)

    def med(m: int, key: str) -> float:
        return statistics.median(r[key] for r in runs[m])

    print()
    print(HEADER)
    for m in (0, 1):
        print(
            _row(
                "median",
                {
                    "mode": runs[m][0]["mode"],
                    "ms_per_http": med(m, "ms_per_http"),
                    "ms_per_sample": med(m, "ms_per_sample"),
                    "throughput": med(m, "throughput"),
                    "http": int(med(m, "http")),
                    "completed": int(med(m, "completed")),
                },
            )
        )
    ratios = [b["ms_per_http"] / a["ms_per_http"] for a, b in zip(runs[0], runs[1]) if a["ms_per_http"]]
    print(
        f"\nserver CPU per HTTP request other/clean: median of per-repeat ratios {statistics.median(ratios):.2f} "
        f"({', '.join(f'{x:.2f}' for x in ratios)}); throughput ratio {med(1, 'throughput') / med(0, 'throughput'):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
