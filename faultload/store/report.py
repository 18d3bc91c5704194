"""Show what a trial did: the JSON report (a versioned contract) and a terminal summary (made by
:mod:`faultload.store.report_text`).

The top-level keys listed in ``CONTRACT_KEYS`` are read by scripts and CI;
they are documented in the README and only ever added to.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from faultload.checker.compose import to_report
from faultload.checker.inputs import Verdict
from faultload.checker.judge import error_examples
from faultload.record.histogram import Histogram
from faultload.record.history import ErrorClass, Outcome
from faultload.record.training import summarize
from faultload.record.trial import TrialResult
from faultload.store.report_text import phases_text, phases_wall, render_text, verdict_lines

REPORT_VERSION = 1
CONTRACT_KEYS = (
    "requested",
    "completed",
    "failed",
    "errors",
    "latency_s",
    "throughput_per_s",
    "wall_s",
    "router",
    "server",
    "target",
    "config",
)
# The terminal's lines are made in faultload.store.report_text; re-exported here, where their users find them.
__all__ = [
    "CONTRACT_KEYS",
    "REPORT_VERSION",
    "build_report",
    "write_json",
    "phases_text",
    "phases_wall",
    "render_text",
    "verdict_lines",
]


def _percentiles(values: np.ndarray) -> dict[str, float | None]:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(values.max())}


def _errors(result: TrialResult) -> dict[str, dict[str, Any]]:
    """Error class -> {count, example}: requests whose last error was of that class."""
    codes = result.history["error"]
    examples = error_examples(result)
    out = {}
    for cls in ErrorClass:
        if cls is ErrorClass.NONE:
            continue
        count = int(np.count_nonzero(codes == cls))
        if count:
            out[cls.key] = {"count": count, "example": examples.get(cls.key, "")}
    return out


def _peak(values: np.ndarray) -> int | None:
    """Largest sampled value, None when never measured (-1)."""
    valid = values[values >= 0]
    return int(valid.max()) if valid.size else None


def _server_block(result: TrialResult) -> dict[str, Any]:
    mon = result.monitor
    block: dict[str, Any] = {k: v for k, v in result.server.items() if k != "log_tail"}
    if mon is None:
        return block
    rss, fds = mon.samples["rss"], mon.samples["fds"]
    block.update(
        {
            "peak_rss_bytes": int(rss.max()) if rss.size and rss.max() >= 0 else None,
            "peak_fds": int(fds.max()) if fds.size and fds.max() >= 0 else None,
            "baseline_fds": mon.baseline.fds if mon.baseline else None,
            "baseline_rss_bytes": mon.baseline.rss if mon.baseline else None,
            "drained_fds": mon.drained.fds if mon.drained else None,
            "drained_rss_bytes": mon.drained.rss if mon.drained else None,
            "cpu_s": result.cpu.get("server_s"),
            "healthz_latency_s": _percentiles(mon.healthz_latency_s),
            "healthz_probes": int(mon.healthz_t.size),
            "healthz_failures": mon.healthz_failures,
            "samples": int(mon.samples["t"].size),
            "fd_limit": list(mon.fd_limit) if mon.fd_limit else None,
            "peak_accept_queue": _peak(mon.samples["accept_queue"]),
            "listen_backlog": _peak(mon.samples["listen_backlog"]),
            "listen_overflows": _peak(mon.samples["listen_overflows"]),
            "listen_drops": _peak(mon.samples["listen_drops"]),
        }
    )
    return block


def _workers_block(result: TrialResult) -> list[dict[str, Any]]:
    """One entry per load worker: where it ran (``node`` "local" or the Ray node's address), from which
    source address, its requests (history rows; a training worker's calls), CPU, and why it crashed."""
    rows = result.history["worker"]
    out = []
    for w in result.workers:
        count = int(np.count_nonzero(rows == w.worker))
        training = result.training is not None and count == 0 and w.worker == len(result.workers) - 1
        out.append(
            {
                "worker": w.worker,
                "role": "train" if training else "sample",
                "node": w.node or "local",
                "address": w.address,
                "requests": len(result.training) if training else count,
                "cpu_s": round(w.cpu_s, 3),
                "crashed": w.crashed.splitlines()[0] if w.crashed else None,
                "clock_offset_s": w.clock_offset_s,
                "clock_error_s": w.clock_error_s,
            }
        )
    return out


def build_report(result: TrialResult, verdicts: list[Verdict] | None = None) -> dict[str, Any]:
    """The JSON report of one trial (``verdicts``: the invariants, when judged)."""
    h = result.history
    config = result.config
    completed = h.count(Outcome.OK)
    submit = Histogram.merged(Histogram.from_state(w.submit_hist) for w in result.workers if w.submit_hist)
    e2e = Histogram.merged(Histogram.from_state(w.e2e_hist) for w in result.workers if w.e2e_hist)
    outcomes = {o.name.lower(): h.count(o) for o in Outcome}
    harness_cpu = (
        result.cpu.get("workers_s", 0.0) + result.cpu.get("router_s", 0.0) + result.cpu.get("monitor_and_parent_s", 0.0)
    )
    trial_cpu = harness_cpu + (result.cpu.get("server_s") or 0.0)
    return {
        "report_version": REPORT_VERSION,
        "requested": config.shape.requests,
        "completed": completed,
        "failed": int(len(h) - completed - outcomes["pending"]),
        "not_finished": outcomes["pending"] + (config.shape.requests - len(h)),
        "outcomes": outcomes,
        "errors": _errors(result),
        "attempts": {
            "history_bytes_per_request": h.nbytes / len(h) if len(h) else None,
            "http_attempts": int(h["attempts"].sum()),
            "submit_retries": int(h["submit_retries"].sum()),
            "repolls": int(h["repolls"].sum()),
            "transport_errors": int(h["transport_errors"].sum()),
        },
        "latency_s": {"submit": submit.summary(), "e2e": e2e.summary()},
        "throughput_per_s": completed / result.load_s if result.load_s > 0 else 0.0,
        "wall_s": result.wall_s,
        "load_s": result.load_s,
        "phases_s": {name: round(seconds, 3) for name, seconds in result.phases_s.items()},
        "router": {**result.router_stats, "peak_in_flight": result.router_stats.get("peak_in_flight")},
        "server": _server_block(result),
        "cpu_s": {
            **result.cpu,
            "harness_s": harness_cpu,
            "harness_share": harness_cpu / trial_cpu if trial_cpu else None,
        },
        # family: whose contract judged it (a bare url= target: SkyRL's)
        "target": {"spec": config.target, "version": result.server.get("version"), "family": config.spec.family},
        # the sdk client's release: "" is the one installed beside faultload (the release the target pins)
        "client": {
            "kind": config.shape.client,
            "sdk": config.shape.sdk if config.shape.client == "sdk" else None,
            # which raw client ran: "compiled" (faultload/client/go) or "python"; None for the sdk client
            "impl": "+".join(sorted({w.client_impl for w in result.workers if w.client_impl})) or None,
        },
        "config": _config_dict(result),
        "faults": _faults_block(result),
        "training": _training_block(result),
        "workers": _workers_block(result),
        "verdict": result.verdict.to_dict() if result.verdict else None,
        "invariants": to_report(verdicts) if verdicts is not None else None,
        "server_log": result.server_log.to_dict() if result.server_log else None,
        "interrupted": result.interrupted,
        "stopped_early": result.stopped_early,
        "cut_off": result.cut_off,
        "error": result.error,
        "cleanup_errors": result.cleanup_errors,
    }


def _training_block(result: TrialResult) -> dict[str, Any] | None:
    """The training mix's calls (per op: requested, completed, failed, lost, corrupt, unfinished, latency),
    the training client's CPU and the engine process's CPU and fds; None for a trial without one."""
    log = result.training
    if log is None:
        return None
    block: dict[str, Any] = summarize(log)
    engine: dict[str, Any] = {"cpu_s": None, "fds_peak": None, "fds_baseline": None}
    samples = result.monitor.samples if result.monitor is not None else {}
    cpu, fds = samples.get("engine_cpu_s"), samples.get("engine_fds")
    if cpu is not None and (cpu >= 0).sum() >= 2:
        valid = cpu[cpu >= 0]
        engine["cpu_s"] = float(valid[-1] - valid[0])
    if fds is not None and (fds >= 0).any():
        valid = fds[fds >= 0]
        engine["fds_peak"], engine["fds_baseline"] = int(valid.max()), int(valid[0])
    block["cpu_s"] = {"training_client_s": result.cpu.get("training_client_s"), "engine_s": engine["cpu_s"]}
    block["engine"] = engine
    return block


def _faults_block(result: TrialResult) -> dict[str, Any]:
    """Each fault as applied and removed, with the requests it touched.

    A request is attributed to a fault when its life (submit to done, or to
    the end of the load if it never finished) overlaps the fault's window and
    it met at least one error or retry.
    """
    block: dict[str, Any] = {"topology": result.topology, "applied": []}
    log = result.fault_log
    if log is None:
        return block
    h = result.history
    start = h["submit_start"]
    end = np.where(np.isfinite(h["done"]), h["done"], result.load_s)
    troubled = (
        (h["transport_errors"] > 0) | (h["submit_retries"] > 0) | (h["error"] != ErrorClass.NONE) | (h["repolls"] > 0)
    )
    for record in log.records:
        entry = record.to_dict()
        entry["spec"] = record.fault.to_spec()
        entry["streams"] = list(record.fault.streams)  # the toxics' directions; [] for down and router faults
        if record.applied_at_s is not None:
            removed = record.removed_at_s if record.removed_at_s is not None else result.load_s
            overlap = np.isfinite(start) & (start <= removed) & (end >= record.applied_at_s)
            hit = overlap & troubled
            entry["requests_overlapping"] = int(np.count_nonzero(overlap))
            entry["requests_with_errors"] = int(np.count_nonzero(hit))
            entry["retries_caused"] = int(h["submit_retries"][hit].sum() + h["transport_errors"][hit].sum())
            entry["repolls_during"] = int(h["repolls"][hit].sum())
        if record.effect and record.applied:
            entry["effect"] = record.effect
        block["applied"].append(entry)
    block["trial_start_epoch"] = log.trial_start_epoch
    return block


def _config_dict(result: TrialResult) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(result.config), default=str))


def write_json(report: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(report, indent=2, sort_keys=False, default=str) + "\n")
