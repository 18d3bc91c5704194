"""Show what a trial did: the JSON report (a versioned contract) and a terminal summary.

The top-level keys listed in ``CONTRACT_KEYS`` are read by scripts and CI;
they are documented in the README and only ever added to.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from faultload.checker.compose import to_report
from faultload.checker.inputs import Verdict
from faultload.checker.judge import error_examples
from faultload.model.switches import switches_text
from faultload.model.trial import TRIAL_PHASES
from faultload.record.histogram import Histogram
from faultload.record.history import ErrorClass, Outcome
from faultload.record.training import summarize
from faultload.record.trial import TrialResult

REPORT_VERSION = 1
CONTRACT_KEYS = (
    "requested", "completed", "failed", "errors", "latency_s", "throughput_per_s", "wall_s",
    "router", "server", "target", "config",
)


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
        out.append({
            "worker": w.worker, "role": "train" if training else "sample",
            "node": w.node or "local", "address": w.address,
            "requests": len(result.training) if training else count,
            "cpu_s": round(w.cpu_s, 3), "crashed": w.crashed.splitlines()[0] if w.crashed else None,
            "clock_offset_s": w.clock_offset_s, "clock_error_s": w.clock_error_s,
        })
    return out


def build_report(result: TrialResult, verdicts: list[Verdict] | None = None) -> dict[str, Any]:
    """The JSON report of one trial (``verdicts``: the invariants, when judged)."""
    h = result.history
    config = result.config
    completed = h.count(Outcome.OK)
    submit = Histogram.merged(Histogram.from_state(w.submit_hist) for w in result.workers if w.submit_hist)
    e2e = Histogram.merged(Histogram.from_state(w.e2e_hist) for w in result.workers if w.e2e_hist)
    outcomes = {o.name.lower(): h.count(o) for o in Outcome}
    harness_cpu = result.cpu.get("workers_s", 0.0) + result.cpu.get("router_s", 0.0) + result.cpu.get("monitor_and_parent_s", 0.0)
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
        "cpu_s": {**result.cpu, "harness_s": harness_cpu, "harness_share": harness_cpu / trial_cpu if trial_cpu else None},
        # family: whose contract judged it (a bare url= target: SkyRL's)
        "target": {"spec": config.target, "version": result.server.get("version"), "family": config.spec.family},
        # the sdk client's release: "" is the one installed beside faultload (the release the target pins)
        "client": {"kind": config.shape.client, "sdk": config.shape.sdk if config.shape.client == "sdk" else None},
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
    troubled = (h["transport_errors"] > 0) | (h["submit_retries"] > 0) | (h["error"] != ErrorClass.NONE) | (h["repolls"] > 0)
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


def _fmt_s(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.2f}s"


def phases_wall(phases: Mapping[str, float]) -> float:
    """The wall the phases split: the sum of the trial's own phases (``judge`` and ``stack_ready`` are outside it)."""
    return sum(seconds for name, seconds in phases.items() if name in TRIAL_PHASES)


def phases_text(phases: Mapping[str, float]) -> str:
    """``load 61%, stack_start 12%, ...; judge +3.1 s``: the wall's phases by their share of it, largest
    first, then the seconds spent around it (a report's or a whole suite session's ``phases_s``)."""
    wall = phases_wall(phases)
    inside = sorted(((n, s) for n, s in phases.items() if n in TRIAL_PHASES), key=lambda item: -item[1])  # ties: run order
    text = ", ".join(f"{name} {seconds / wall:.0%}" for name, seconds in inside) if wall > 0 else "no wall measured"
    around = [f"{name} +{seconds:.1f} s" for name, seconds in phases.items() if name not in TRIAL_PHASES]
    return text + (f"; {', '.join(around)}" if around else "")


def _fmt_bytes(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.0f} MiB"


def _server_lines(server: dict[str, Any]) -> list[str]:
    """The server's fds, RSS, /healthz and accept queue, for the text report."""
    hz = server["healthz_latency_s"]
    return [
        f"server fds baseline {server['baseline_fds']} peak {server['peak_fds']} drained {server['drained_fds']}; "
        f"RSS baseline {_fmt_bytes(server['baseline_rss_bytes'])} peak {_fmt_bytes(server['peak_rss_bytes'])}",
        f"/healthz p50 {_fmt_s(hz['p50'])} p99 {_fmt_s(hz['p99'])} max {_fmt_s(hz['max'])}, "
        f"failures {server['healthz_failures']}/{server['healthz_probes']}",
        f"accept queue peak {server.get('peak_accept_queue')}/{server.get('listen_backlog')}, "
        f"listen overflows +{server.get('listen_overflows')}, drops +{server.get('listen_drops')}",
    ]


def verdict_lines(invariants: Sequence[dict[str, Any]] | None, collapse: dict[str, Any] | None) -> list[str]:
    """The verdicts as a run prints them: one line per invariant (``to_report`` form), then the collapse.

    ``faultload check`` prints a stored trial's verdicts through this too, so
    they read exactly as the live run's.
    """
    lines = []
    for inv in invariants or []:
        mark = {True: "ok      ", False: "VIOLATED", None: "unknown "}[inv["ok"]]
        lines.append(f"[{mark}] {inv['name']}: {inv['detail']}")
    return lines + (_collapse_lines(collapse) if collapse else [])


def _collapse_lines(v: dict[str, Any]) -> list[str]:
    """The watchdog's collapse verdict: the chain, its evidence, what followed."""
    chain = " -> ".join([f"{v['kind']} at t={v['at_s']:.0f}s"]
                        + [f"{c['kind']} at t={c['at_s']:.0f}s" for c in v["consequences"]])
    return ([f"VERDICT: {chain}"] + [f"  evidence: {e}" for e in v["evidence"]]
            + [f"  then: {c['evidence']}" for c in v["consequences"]])


def _sdk_text(client: dict | None) -> str:
    """", through the tinker SDK (tinker==X.Y.Z)" for an sdk-client trial ("" for the raw client or an old report)."""
    if not client or client.get("kind") != "sdk":
        return ""
    return f", through the tinker SDK ({client['sdk'] or 'the release installed beside faultload'})"


def _sampling_path_text(report: dict[str, Any]) -> str:
    """What the raw client does not model on this server: tinker 0.38's per-session retrieve_futures polling, when
    the server's client config turns it on (or did not say). "" when it does not, for the SDK client (it follows
    the server), and for a report written before the question was asked."""
    client = report.get("client") or {}
    if client.get("kind") == "sdk" or "retrieve_futures" not in report["server"]:
        return ""
    advertised = report["server"]["retrieve_futures"]
    if advertised is False:
        return ""
    said = ("turns on" if advertised else "did not answer whether it turns on")
    return (f"sampling path: the server's client/config {said} tinker 0.38's per-session retrieve_futures polls; "
            "the raw client polls retrieve_future per request as 0.25 does (run --client sdk --sdk tinker==0.38.0 "
            "for that path)")


def _family_text(target: dict[str, Any]) -> str:
    """Whose contract judged a target whose spec does not name its family (a bare url=)."""
    family = target.get("family")
    return f"; judged as {family}" if family and not target["spec"].startswith(family) else ""


def render_text(report: dict[str, Any]) -> str:
    """A short terminal summary of a report."""
    lat = report["latency_s"]
    server = report["server"]
    router = report["router"]
    lines = [
        f"target {report['target']['spec']} (version {report['target']['version']}{_family_text(report['target'])})"
        + switches_text(report["config"].get("regress", []), report["config"].get("fixes", [])),
        f"requests {report['requested']}: completed {report['completed']}, failed {report['failed']}, "
        f"not finished {report['not_finished']}" + _sdk_text(report.get("client")),
        f"throughput {report['throughput_per_s']:.0f}/s over {report['load_s']:.1f}s of load ({report['wall_s']:.1f}s wall)",
        "latency    p50      p90      p99      max",
    ]
    if report.get("phases_s"):  # a report written before phases_s has none
        lines.insert(3, f"trial wall {phases_wall(report['phases_s']):.1f} s: {phases_text(report['phases_s'])}")
    path_note = _sampling_path_text(report)
    if path_note:
        lines.insert(2, path_note)
    for name in ("submit", "e2e"):
        block = lat[name]
        lines.append(f"  {name:<7}" + "".join(f"{_fmt_s(block[k]):>9}" for k in ("p50", "p90", "p99", "max")))
    att = report["attempts"]
    lines.append(
        f"attempts {att['http_attempts']} (submit retries {att['submit_retries']}, re-polls {att['repolls']}, "
        f"transport errors {att['transport_errors']})"
    )
    if report["errors"]:
        lines.append("errors:")
        for key, block in report["errors"].items():
            lines.append(f"  {key:<14} {block['count']:>7}  e.g. {block['example'][:110]}")
    lines.append(f"router peak in-flight {router.get('peak_in_flight')}, received {router.get('received')}")
    if "peak_fds" in server:
        lines += _server_lines(server)
    cpu = report["cpu_s"]
    if cpu.get("harness_share") is not None:
        lines.append(
            f"cpu: server {cpu.get('server_s', 0):.1f}s, harness {cpu['harness_s']:.1f}s "
            f"({cpu['harness_share']:.0%} of the trial's CPU)"
        )
    for fault in report.get("faults", {}).get("applied", []):
        applied, removed = fault.get("applied_at_s"), fault.get("removed_at_s")
        window = f"{applied:.1f}s..{removed:.1f}s" if applied is not None and removed is not None else "not applied"
        if fault.get("not_applied"):
            window += f" ({fault['not_applied']})"
        elif fault.get("event_at_s") is not None:
            window += f" (event at {fault['event_at_s']:.1f}s)"
        streams = fault.get("streams") or []
        direction = f" ({' + '.join(streams)})" if streams else ""
        lines.append(
            f"fault {fault['spec']}{direction}: {window}; {fault.get('requests_with_errors', 0)} requests hit, "
            f"{fault.get('retries_caused', 0)} retries" + (f"; ERROR {fault['error']}" if fault.get("error") else "")
        )
        if fault.get("effect"):
            lines.append(f"  {fault['effect']}")
    lines += verdict_lines(report.get("invariants"), report.get("verdict"))
    if report.get("interrupted"):
        lines.append("INTERRUPTED: partial report")
    if report.get("error"):
        lines.append(f"ERROR: {report['error']}")
    return "\n".join(lines)
