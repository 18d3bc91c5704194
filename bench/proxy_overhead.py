"""What routing a trial through Toxiproxy (no toxics) costs: the same trial with --proxies off and on.

Runs the same ``faultload run`` trial (default: 4,096 requests, the CLI's
defaults otherwise) with ``--proxies off`` and ``--proxies on``, alternating,
N times each (default 3). The order flips every repeat (off,on / on,off /
off,on ...) so that a drift of the shared machine does not always favour the
same mode. Each trial gets a fresh stack (router, server and, when on,
Toxiproxy with its edge and backend proxies), as ``faultload run`` does.

Per trial it prints throughput (completed / load seconds), e2e p50, the
server's CPU per completed request and, with proxies on, toxiproxy-server's
CPU per completed request (psutil, the process's own counters, not wall
time); then per mode the medians, and the median of the per-repeat
throughput ratios on/off beside the ratio of the median throughputs. The
machine is shared and noisy: read the medians.

Usage: .faultload/venv/bin/python bench/proxy_overhead.py [--repeats N] [--requests R] [faultload run args...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _trial import checked, fresh_stack  # noqa: E402

from faultload.host.workspace import Workspace  # noqa: E402
from faultload.run.trial import run_trial  # noqa: E402
from faultload.store import report as report_mod  # noqa: E402

MODES = ("off", "on")


def _cpu_s(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def one_trial(run_args: list[str], proxies: str, workspace: Workspace) -> dict[str, Any]:
    with fresh_stack([*run_args, "--proxies", proxies], workspace) as (config, stack):
        toxiproxy_pid = stack.faults.server.pid if stack.faults is not None else None
        toxiproxy_cpu0 = _cpu_s(toxiproxy_pid)
        result = checked(run_trial(config, workspace, stack=stack))
        toxiproxy_cpu1 = _cpu_s(toxiproxy_pid)
    rep = report_mod.build_report(result)
    done = max(rep["completed"], 1)
    server_s = rep["cpu_s"].get("server_s") or 0.0
    toxiproxy_s = (
        (toxiproxy_cpu1 - toxiproxy_cpu0) if toxiproxy_cpu0 is not None and toxiproxy_cpu1 is not None else None
    )
    return {
        "proxies": proxies,
        "completed": rep["completed"],
        "requested": rep["requested"],
        "throughput": rep["throughput_per_s"],
        "e2e_p50_ms": 1000 * (rep["latency_s"]["e2e"]["p50"] or float("nan")),
        "server_ms_per_req": 1000 * server_s / done,
        "toxiproxy_ms_per_req": None if toxiproxy_s is None else 1000 * toxiproxy_s / done,
        "transport_errors": rep["attempts"]["transport_errors"],
    }


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _row(label: str, r: dict[str, Any]) -> str:
    return (
        f"{label:<10}{r['proxies']:>4}  {r['throughput']:>10.0f}  {r['e2e_p50_ms']:>9.1f}  "
        f"{r['server_ms_per_req']:>10.3f}  {_fmt(r['toxiproxy_ms_per_req'], '>12.3f'):>12}  "
        f"{r['completed']:>5}/{r['requested']:<5}  {r['transport_errors']:>6}"
    )


HEADER = (
    f"{'':<10}{'prox':>4}  {'req/s':>10}  {'e2e p50ms':>9}  {'server ms':>10}  {'toxiproxy ms':>12}  "
    f"{'completed':>11}  {'t.err':>6}"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--requests", type=int, default=4096)
    known, rest = parser.parse_known_args()
    if known.repeats < 1:
        parser.error("--repeats must be >= 1")
    run_args = ["--requests", str(known.requests), *rest]
    workspace = Workspace.default(os.environ.get("FAULTLOAD_HOME"))
    print("faultload run", " ".join(run_args), "--proxies off|on   x", known.repeats, flush=True)
    print(HEADER, flush=True)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for i in range(known.repeats):
        order = MODES if i % 2 == 0 else MODES[::-1]
        for mode in order:
            r = one_trial(run_args, mode, workspace)
            runs[mode].append(r)
            print(_row(f"run {i + 1}", r), flush=True)

    def med(mode: str, key: str) -> float | None:
        values = [r[key] for r in runs[mode] if r[key] is not None]
        return statistics.median(values) if values else None

    print()
    print("medians over", known.repeats, "repeats")
    print(HEADER)
    for mode in MODES:
        print(
            _row(
                "median",
                {
                    "proxies": mode,
                    "throughput": med(mode, "throughput"),
                    "e2e_p50_ms": med(mode, "e2e_p50_ms"),
                    "server_ms_per_req": med(mode, "server_ms_per_req"),
                    "toxiproxy_ms_per_req": med(mode, "toxiproxy_ms_per_req"),
                    "completed": int(med(mode, "completed")),
                    "requested": known.requests,
                    "transport_errors": int(med(mode, "transport_errors")),
                },
            )
        )
    ratios = [on["throughput"] / off["throughput"] for on, off in zip(runs["on"], runs["off"]) if off["throughput"]]
    print()
    print(
        f"throughput on/off: median of per-repeat ratios {statistics.median(ratios):.3f} "
        f"({', '.join(f'{r:.3f}' for r in ratios)}); ratio of medians {med('on', 'throughput') / med('off', 'throughput'):.3f}"
    )
    print(
        f"e2e p50 on/off: {med('on', 'e2e_p50_ms') / med('off', 'e2e_p50_ms'):.2f}x; "
        f"server CPU per request on/off: {med('on', 'server_ms_per_req') / med('off', 'server_ms_per_req'):.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
