"""Did the server stay within its means: ``bounded_fds``, ``bounded_rss``, ``bounded_cpu``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from faultload.checker.budgets import MIB, Budgets, cpu_ms_per_request, retention_s
from faultload.checker.contract.faults import in_force_windows
from faultload.checker.contract.processes import WORKER_POOL_DRAIN
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.checker.wording import fmt_bytes, fmt_s
from faultload.record.history import History, Outcome

if TYPE_CHECKING:  # type-only: keeps this module cheap to import (no toxiproxy client, no psutil)
    from faultload.record.samples import MonitorSamples
# logprob (the proto's packed fields; JSON is larger — see bounded_rss).
RESULT_BYTES_PER_TOKEN = 8

_POOL_NOTE = f"drain not judged: the family's worker pool decides it ({WORKER_POOL_DRAIN.name})"


def _peak_in_flight(inputs: CheckInputs) -> tuple[float, str]:
    """Peak requests in flight at the server, and where the number came from.

    The largest of the sampled client and router peaks, the router's own exact
    peak and the client's exact peak from its history: samples every 0.5 s
    miss short peaks (a burst answered at once by an immediate router: 99 in
    flight for 0.1 s, 2 at the sample), and the client does not count a
    resubmitted asample whose first copy the server still holds, while the
    router sees every forward.
    """
    monitor, shape, router_peak = inputs.monitor, inputs.shape, inputs.router_peak_in_flight
    best, note = -1.0, ""
    if monitor is not None:
        t = monitor.samples.get("t")
        for key, label in (("client_in_flight", "client in-flight"), ("router_in_flight", "router in-flight")):
            values = monitor.samples.get(key)
            if values is None or values.size == 0:
                continue
            valid = np.isfinite(values) & (values >= 0)
            if valid.any():
                i = int(np.flatnonzero(valid)[np.argmax(values[valid])])
                if values[i] > best:
                    when = f" at {fmt_s(float(t[i]))}" if t is not None and t.size > i else ""
                    best, note = float(values[i]), f"peak {label} {int(values[i])}{when}"
    if router_peak is not None and router_peak > best:
        best, note = float(router_peak), f"router's exact peak in-flight {router_peak}"
    client_peak = inputs.history.peak_in_flight() if len(inputs.history) else -1
    if client_peak > best:
        best, note = float(client_peak), f"client's exact peak in-flight {client_peak}"
    if best >= 0:
        return best, note
    cap = shape.max_outstanding or shape.requests
    cap = min(cap, shape.requests)
    return float(cap), f"shape cap {cap} (no in-flight samples)"


def _series(monitor: MonitorSamples, key: str) -> tuple[np.ndarray, np.ndarray]:
    values = monitor.samples.get(key)
    t = monitor.samples.get("t")
    if values is None or values.size == 0:
        return np.empty(0), np.empty(0)
    valid = np.isfinite(values) & (values >= 0)
    t = t[valid] if t is not None and t.size == values.size else np.full(int(valid.sum()), np.nan)
    return values[valid], t


def _baseline(monitor: MonitorSamples, key: str, values: np.ndarray) -> tuple[int, str]:
    """The server's ``key`` (fds, rss) before the load, else its first sample, and which it was."""
    snapshot = monitor.baseline
    if snapshot is not None and getattr(snapshot, key) >= 0:
        return int(getattr(snapshot, key)), "baseline"
    return int(values[0]), "baseline (first sample)"


TRAINER_CONNECTIONS = 2


def check_bounded_fds(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Peak fds ≤ baseline + fds_slack + fds_per_in_flight × peak in-flight + idle connections; drained ≤ baseline + ε.

    Figure: fds per request in flight, (peak − baseline − idle) / peak in
    flight (at least 1); budget: ``fds_per_in_flight`` + ``fds_slack`` / peak
    in flight, so figure > budget is the peak rule exactly. Idle connections:
    the client's peak of open connections beyond the peak in flight, one fd
    each at the server (the client keeps finished connections for reuse until
    its 5 s idle expiry, as the SDK does), and for a trial that trained two per
    trainer (its call in flight and its heartbeat: connections the sampling
    counters do not see).
    Reaching the server's own soft RLIMIT_NOFILE (``monitor.fd_limit``, when
    known) is a violation whatever the budget: from there on every accept and
    every forward fails with "Too many open files". Fds not back near the
    baseline after the drain is a violation too; both are named in the detail.
    """
    monitor = inputs.monitor
    if monitor is None:
        return Verdict(ok=None, figure=None, budget=None, head="no monitor samples")
    fds, t = _series(monitor, "fds")
    if fds.size == 0:
        return Verdict(ok=None, figure=None, budget=None, head="no process metrics (server fds not readable)")
    baseline, base_note = _baseline(monitor, "fds", fds)
    in_flight, in_flight_note = _peak_in_flight(inputs)
    in_flight = max(1.0, in_flight)
    connections, _ = _series(monitor, "client_connections_peak")
    idle = max(0, int(connections.max()) - int(in_flight)) if connections.size else 0
    if inputs.training is not None:  # each trainer may hold two connections at once: a call and its heartbeat
        idle += TRAINER_CONNECTIONS * inputs.shape.training.trainers
    i = int(np.argmax(fds))
    peak, peak_t = int(fds[i]), float(t[i])
    per_in_flight = (peak - baseline - idle) / in_flight
    per_budget = budgets.fds_per_in_flight + budgets.fds_slack / in_flight
    peak_budget = baseline + budgets.fds_slack + budgets.fds_per_in_flight * in_flight + idle
    idle_text = f" + {idle} idle client connections" if idle else ""
    if inputs.training is not None and idle:
        idle_text += f" (of them {TRAINER_CONNECTIONS}×{inputs.shape.training.trainers} the trainers')"
    head = (
        f"{per_in_flight:.2f} fds per request in flight (budget {per_budget:.2f}): peak {peak} fds at "
        f"{fmt_s(peak_t)} vs {base_note} {baseline} + {budgets.fds_slack} + {budgets.fds_per_in_flight:g}×"
        f"{int(in_flight)} in flight ({in_flight_note}){idle_text} = {peak_budget:g}"
    )
    drained = monitor.drained.fds if monitor.drained is not None and monitor.drained.fds >= 0 else None
    pool = budgets.drain_fds_db_pool if inputs.training is not None else 0
    drain_budget = baseline + budgets.drain_fds_epsilon + pool
    limit = getattr(monitor, "fd_limit", None)
    soft = int(limit[0]) if limit and limit[0] and limit[0] > 0 else None
    if soft is not None:
        head += f"; fd limit {soft}"
        if peak >= soft:  # the server could not open another socket: a collapse, not a slow leak
            return Verdict(
                ok=False,
                figure=per_in_flight,
                budget=per_budget,
                head=f"reached the server's fd limit ({soft}): {head}",
            )
    if peak > peak_budget:
        return Verdict(ok=False, figure=per_in_flight, budget=per_budget, head=f"over budget: {head}")
    if inputs.contract.worker_pool:
        return Verdict(ok=True, figure=per_in_flight, budget=per_budget, head=f"{head}; {_POOL_NOTE}")
    if drained is None:
        return Verdict(ok=None, figure=per_in_flight, budget=per_budget, head=f"{head}; drained fds not measured")
    pool_text = f" + {pool} (the DB pool, training)" if pool else ""
    drain_text = f"drained {drained} fds vs {baseline} + {budgets.drain_fds_epsilon}{pool_text} = {drain_budget}"
    if drained > drain_budget:
        return Verdict(
            ok=False, figure=per_in_flight, budget=per_budget, head=f"not back to baseline: {drain_text}; {head}"
        )
    return Verdict(ok=True, figure=per_in_flight, budget=per_budget, head=f"{head}; {drain_text}")


def _result_bytes_per_request(inputs: CheckInputs) -> tuple[float, str]:
    shape = inputs.shape
    formula = float(shape.result_tokens * shape.num_samples * RESULT_BYTES_PER_TOKEN)
    history = inputs.history
    ok = history["outcome"] == Outcome.OK
    observed = float(history["result_bytes"][ok].mean()) if ok.any() else 0.0
    if observed > formula:
        return observed, f"{observed:.0f} B/result observed"
    return formula, f"{shape.result_tokens}×{shape.num_samples}×{RESULT_BYTES_PER_TOKEN} B/result"


def check_bounded_rss(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Peak RSS within a budget of the result bytes in flight; no growth left after drain.

    In-flight result bytes = peak in-flight × result_tokens × num_samples ×
    RESULT_BYTES_PER_TOKEN, or × the mean observed size of a result body when
    that is larger (JSON bodies: the server holds the body it sends).
    At every sample: RSS ≤ baseline + rss_slack_bytes + rss_bytes_per_in_flight_result_byte
    × that + retained × (retained_result_overhead_bytes + the same multiple of a
    result), where retained = results completed within ``retention_window_s``
    (× time scale) before the sample: the server keeps delivered results that
    long by design (the family's retrieved TTL: SkyRL 0.4.0's 300 s; TuFT's results stay until it stops), so they
    are not a leak.
    Drained ≤ baseline + drain_rss_epsilon_bytes + drain_rss_growth_fraction ×
    (peak − baseline): a Python process keeps much of its freed memory, so by
    default (fraction 1.0) this asks only that RSS stopped growing after load.

    Figure: RSS growth over the baseline in MiB at the sample judged (the
    one furthest over its budget, else the peak); budget: that sample's
    allowed growth in MiB. A drained RSS over its budget is named in the detail.
    """
    monitor = inputs.monitor
    if monitor is None:
        return Verdict(ok=None, figure=None, budget=None, head="no monitor samples")
    rss, t = _series(monitor, "rss")
    if rss.size == 0:
        return Verdict(ok=None, figure=None, budget=None, head="no process metrics (server RSS not readable)")
    baseline, base_note = _baseline(monitor, "rss", rss)
    in_flight, in_flight_note = _peak_in_flight(inputs)
    per_request, per_note = _result_bytes_per_request(inputs)
    in_flight_bytes = in_flight * per_request
    mult = budgets.rss_bytes_per_in_flight_result_byte
    # Results the server keeps by design after delivery (its retrieved TTL): at
    # each sample, those completed within the retention window before it.
    done = np.sort(inputs.history["done"][np.isfinite(inputs.history["done"])])
    window = inputs.shape.scaled(retention_s(budgets, inputs.contract))
    retained = np.searchsorted(done, t, side="right") - np.searchsorted(done, t - window, side="left")
    per_retained = budgets.retained_result_overhead_bytes + mult * per_request
    in_flight_budget = mult * in_flight_bytes + in_flight * budgets.in_flight_request_overhead_bytes
    budget_at = baseline + budgets.rss_slack_bytes + in_flight_budget + retained * per_retained
    over = rss - budget_at
    i = int(np.argmax(over)) if (over > 0).any() else int(np.argmax(rss))
    peak, peak_t, peak_budget = int(rss[i]), float(t[i]), float(budget_at[i])
    head = (
        f"{'peak' if over[i] <= 0 else 'RSS'} {fmt_bytes(peak)} at {fmt_s(peak_t)} vs {base_note} "
        f"{fmt_bytes(baseline)} + {fmt_bytes(budgets.rss_slack_bytes)} + {fmt_bytes(in_flight_budget)} for "
        f"{int(in_flight)} in flight ({in_flight_note}, {per_note})"
        f" + {int(retained[i])} retained × {fmt_bytes(per_retained)} = {fmt_bytes(peak_budget)}"
    )
    growth_mib, allowed_mib = (peak - baseline) / MIB, (peak_budget - baseline) / MIB
    if over[i] > 0:
        return Verdict(ok=False, figure=growth_mib, budget=allowed_mib, head=f"over budget: {head}")
    if inputs.contract.worker_pool:
        return Verdict(ok=True, figure=growth_mib, budget=allowed_mib, head=f"{head}; {_POOL_NOTE}")
    drained = monitor.drained.rss if monitor.drained is not None and monitor.drained.rss >= 0 else None
    if drained is None:
        return Verdict(ok=None, figure=growth_mib, budget=allowed_mib, head=f"{head}; drained RSS not measured")
    growth = max(0, peak - baseline)
    drain_budget = baseline + budgets.drain_rss_epsilon_bytes + budgets.drain_rss_growth_fraction * growth
    drain_text = (
        f"drained {fmt_bytes(drained)} vs {fmt_bytes(baseline)} + "
        f"{fmt_bytes(budgets.drain_rss_epsilon_bytes)} + "
        f"{budgets.drain_rss_growth_fraction:g}×{fmt_bytes(growth)} growth = {fmt_bytes(drain_budget)}"
    )
    if drained > drain_budget:
        return Verdict(
            ok=False, figure=growth_mib, budget=allowed_mib, head=f"not back to baseline: {drain_text}; {head}"
        )
    return Verdict(ok=True, figure=growth_mib, budget=allowed_mib, head=f"{head}; {drain_text}")


# -- CPU ------------------------------------------------------------------------------


def server_http_requests(history: History, monitor: MonitorSamples | None) -> int:
    """HTTP requests the server answered in a trial: the client's attempts plus the /healthz probes."""
    attempts = int(history["attempts"].astype(np.int64).sum()) if len(history) else 0
    probes = int(np.asarray(monitor.healthz_t).size) if monitor is not None else 0
    return attempts + probes


def check_bounded_cpu(inputs: CheckInputs, budgets: Budgets) -> Verdict:
    """Server CPU per HTTP request ≤ server_cpu_ms_per_request + server_cpu_ms_per_result_kib × result KiB.

    The server's CPU (its own /proc counters, first to last monitor sample)
    over the HTTP requests it answered (client attempts + /healthz probes).
    Result KiB is the mean result body per request, spread over its attempts
    (decoding the router's answer and encoding the client's cost in
    proportion). A trial that trained gets ``server_cpu_ms_per_training_request``
    per training HTTP attempt taken off the server's CPU first. Unknown below ``cpu_min_requests`` requests (the fixed cost
    of an idle loop and the drain dominates) and when a fault took effect (a
    failed forward costs the server a traceback, by design of its logging).

    Figure: ms of server CPU per HTTP request; budget: the bound above at the trial's result size.
    """
    monitor = inputs.monitor
    if monitor is None:
        return Verdict(ok=None, figure=None, budget=None, head="no monitor samples")
    cpu, _ = _series(monitor, "cpu_s")
    if cpu.size < 2:
        return Verdict(ok=None, figure=None, budget=None, head="no server CPU samples")
    http = server_http_requests(inputs.history, monitor)
    if http < budgets.cpu_min_requests:
        return Verdict(
            ok=None,
            figure=None,
            budget=None,
            head=f"{http} HTTP requests < cpu_min_requests {budgets.cpu_min_requests}",
        )
    if in_force_windows(inputs):  # the contract's no_fault_cost
        return Verdict(ok=None, figure=None, budget=None, head="faults took effect: CPU per request not judged")
    history = inputs.history
    ok = history["outcome"] == Outcome.OK
    result_kib = float(history["result_bytes"][ok].astype(np.float64).sum()) / 1024.0 / http
    server_ms = 1000.0 * float(cpu[-1] - cpu[0])
    # Training calls share the process: each of their HTTP attempts gets its own allowance.
    training = int(inputs.training["attempts"].sum()) if inputs.training is not None else 0
    allowance = budgets.server_cpu_ms_per_training_request * training
    per_request = (server_ms - allowance) / http
    base = cpu_ms_per_request(budgets, inputs.contract)
    budget = base + budgets.server_cpu_ms_per_result_kib * result_kib
    training_text = (
        f" after {allowance / 1000:.1f} s allowed for {training} training HTTP requests × "
        f"{budgets.server_cpu_ms_per_training_request:g} ms"
        if training
        else ""
    )
    head = (
        f"{per_request:.3f} ms of server CPU per HTTP request ({server_ms / 1000:.1f} s over {http} requests"
        f"{training_text}, {result_kib:.1f} KiB of results each) vs {base:g} + "
        f"{budgets.server_cpu_ms_per_result_kib:g}×{result_kib:.1f} = {budget:.3f} ms"
    )
    if per_request > budget:
        return Verdict(ok=False, figure=per_request, budget=budget, head=f"over budget: {head}")
    return Verdict(ok=True, figure=per_request, budget=budget, head=head)
