"""A trial's JSON report (:func:`faultload.store.report.build_report`) as the few lines a terminal shows, and the
pieces of those lines that other summaries share: the verdicts as a run prints them, the wall's phases.

Apart from building the report (``faultload.store.report``, which re-exports these): the lines read only the
report's plain data, so a stored report, a bundle and a suite session print them alike.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from faultload.model.switches import switches_text
from faultload.model.trial import TRIAL_PHASES


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
    inside = sorted(
        ((n, s) for n, s in phases.items() if n in TRIAL_PHASES), key=lambda item: -item[1]
    )  # ties: run order
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
    chain = " -> ".join(
        [f"{v['kind']} at t={v['at_s']:.0f}s"] + [f"{c['kind']} at t={c['at_s']:.0f}s" for c in v["consequences"]]
    )
    return (
        [f"VERDICT: {chain}"]
        + [f"  evidence: {e}" for e in v["evidence"]]
        + [f"  then: {c['evidence']}" for c in v["consequences"]]
    )


def _client_text(client: dict | None) -> str:
    """Which client drove the load: ", through the tinker SDK (tinker==X.Y.Z)" or ", raw client (compiled)", so a
    reader of the terminal summary knows whose timings these are ("" for a report written before it was said)."""
    if not client:
        return ""
    if client.get("kind") == "sdk":
        return f", through the tinker SDK ({client['sdk'] or 'the release installed beside faultload'})"
    return f", raw client ({client['impl']})" if client.get("impl") else ""


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
    said = "turns on" if advertised else "did not answer whether it turns on"
    return (
        f"sampling path: the server's client/config {said} tinker 0.38's per-session retrieve_futures polls; "
        "the raw client polls retrieve_future per request as 0.25 does (run --client sdk --sdk tinker==0.38.0 "
        "for that path)"
    )


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
        f"not finished {report['not_finished']}" + _client_text(report.get("client")),
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
