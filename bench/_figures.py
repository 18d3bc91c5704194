"""What the side-by-side benchmarks read from a trial's JSON report: CPU per completed request, by role."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any, Callable


def cpu_per_request(report: dict[str, Any]) -> dict[str, float]:
    """ms of CPU per completed request: load workers (and their start-up before the load), router, parent,
    the harness in all, and the server; ``workers_startup`` is NaN in a report written before it existed."""
    cpu, done = report["cpu_s"], max(report["completed"], 1)
    return {
        "workers_ms_per_req": 1000 * cpu["workers_s"] / done,
        "workers_startup_ms_per_req": 1000 * cpu.get("workers_startup_s", float("nan")) / done,
        "router_ms_per_req": 1000 * cpu["router_s"] / done,
        "parent_ms_per_req": 1000 * cpu["monitor_and_parent_s"] / done,
        "harness_ms_per_req": 1000 * cpu["harness_s"] / done,
        "server_ms_per_req": 1000 * (cpu.get("server_s") or 0.0) / done,
    }


def abba(repeat: int, run: Callable[[str], Any]) -> dict[str, list[Any]]:
    """``run("A")`` and ``run("B")`` ``repeat`` times each, in A B B A order, so drift on a shared machine moves
    both sides alike."""
    runs: dict[str, list[Any]] = {"A": [], "B": []}
    for i in range(repeat):
        for side in (("A", "B"), ("B", "A"))[i % 2]:
            runs[side].append(run(side))
    return runs


def print_ab_medians(runs: dict[str, list[float]], what: str) -> None:
    """Per side its median, spread ((max - min) / median) and values; then B/A of the medians."""
    medians = {side: statistics.median(values) for side, values in runs.items()}
    for side, values in runs.items():
        spread = (max(values) - min(values)) / medians[side] if medians[side] else 0.0
        print(
            f"{side}: median {medians[side]:.1f} {what} (spread {spread:.0%}): " + ", ".join(f"{v:.1f}" for v in values)
        )
    print(f"B/A: {medians['B'] / medians['A']:.2f}")


def checkouts_parser(description: str, repeat: int) -> argparse.ArgumentParser:
    """The options of a two-checkout benchmark: ``--a``, ``--b`` (faultload checkouts) and ``--repeat``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--a", required=True, type=Path, help="checkout A (the baseline)")
    parser.add_argument("--b", required=True, type=Path, help="checkout B")
    parser.add_argument("--repeat", type=int, default=repeat)
    return parser
