"""What the side-by-side benchmarks read from a trial's JSON report: CPU per completed request, by role."""

from __future__ import annotations

from typing import Any


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
