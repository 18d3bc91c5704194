"""Integration: every fault kind on every link, and the router faults, against a real SkyRL 0.4.0 trial.

Each test runs a small trial (``run_trial``) on ONE shared stack (router +
Toxiproxy edge/backend proxies + the real 0.4.0 server, started once for the
module) and asserts the fault's *observable* effect, measured against a
baseline trial of the same shape run on the same stack — never merely "it did
not crash". Every trial also checks that the fault was applied and removed
without error and that nothing failed to clean up.

Robustness on a shared, noisy 2-core machine:

- durations are only ever compared with a baseline (median vs median) and the
  asserted gain is a generous fraction (50-60 %) of what the fault must add
  by construction (a toxic can only slow things down, so noise cannot fake
  the effect, only shrink the margin); nothing asserts "faster than X s";
- counts that depend on timing (how many requests a window hit) are asserted
  to be > 0, not equal to a number.

Facts about the system under test that shape these tests (measured here):

- client timers are scaled (time scale 0.1: 4.5 s poll timeout, backoff
  0.1 s * 2**n), so a client timeout fits in a short trial;
- SkyRL 0.4.0 logs every failed forward with a Rich traceback, which costs
  the server's event loop roughly a second each on this machine: tests whose
  fault fails forwards keep few requests in flight (``max_outstanding`` 2-4)
  so that only a handful fail;
- Toxiproxy closes the connections a ``timeout`` toxic held when the toxic is
  removed, so a short timeout window shows up as resets at its end, and the
  client's own timeout only when the window outlasts it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil
import pytest
from conftest import TARGETS, WORKDIR, require_target, require_toxiproxy

from faultload.checker.budgets import load_budgets
from faultload.checker.judge import judge
from faultload.host.workspace import Workspace
from faultload.model.faults import FaultSchedule
from faultload.model.router import RouterConfig
from faultload.model.shape import LoadShape, PollBehaviour
from faultload.model.trial import ServerKnobs, TrialConfig
from faultload.record.history import Outcome
from faultload.run.stack import Stack
from faultload.run.trial import TrialResult, run_trial
from faultload.store import report

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TARGET = "skyrl==0.4.0"
TIME_SCALE = 0.1  # client poll timeout 4.5 s, asample timeout 6 s, backoff 0.1 s * 2**n
# A read deadline on forwards so that a held backend connection can never hang a trial
# for the default 2048 s; far above any forward here (the slowest, bandwidth, keeps reading).
KNOBS = ServerKnobs(forwarding_timeout_s=5.0)
ROUTER = RouterConfig(
    gen_seconds=0.05
)  # latency mode: 256 generate at once, 50 ms each (effects are measured against a fast engine)
SMALL = dict(requests=300, max_outstanding=16, result_tokens=16)
BIG = dict(requests=32, max_outstanding=16, result_tokens=4096)  # ~32 KB proto results


# --------------------------------------------------------------------------- fixtures and helpers


def _config(faults: tuple[str, ...] = (), fatal: tuple[str, ...] = (), **shape: Any) -> TrialConfig:
    shape.setdefault("seed", 7)
    return TrialConfig(
        target=TARGET,
        shape=LoadShape(time_scale=TIME_SCALE, **shape),
        router=ROUTER,
        faults=FaultSchedule.parse(list(faults)),
        proxies="on",
        knobs=KNOBS,
        drain_s=1.0,
        max_wall_s=90.0,
        fatal_faults=fatal,
    )


@dataclass
class Trial:
    result: TrialResult
    rep: dict[str, Any]
    router_before: dict[str, Any]

    @property
    def history(self):
        return self.result.history

    def e2e(self) -> np.ndarray:
        h = self.history
        ok = h["outcome"] == Outcome.OK
        return (h["done"] - h["submit_start"])[ok]

    def p50(self) -> float:
        return float(np.median(self.e2e()))

    def examples(self) -> dict[str, str]:
        """Every error class any request met (the report's ``errors`` keeps only each request's last)."""
        out: dict[str, str] = {}
        for worker in self.result.workers:
            for key, message in worker.error_examples.items():
                out.setdefault(key, message)
        return out

    def record(self, index: int = -1):
        return self.result.fault_log.records[index]

    def router_delta(self, key: str) -> int:
        return int(self.rep["router"].get(key, 0)) - int(self.router_before.get(key, 0))

    def log_classes(self) -> dict[str, Any]:
        return dict(self.result.server_log.classes) if self.result.server_log else {}

    def done_between(self, lo: float, hi: float) -> int:
        done = self.history["done"]
        return int(np.count_nonzero(np.isfinite(done) & (done > lo) & (done < hi)))

    def started_after(self, t: float) -> np.ndarray:
        start = self.history["submit_start"]
        return np.isfinite(start) & (start > t)

    def verdicts(self, fatal: tuple[str, ...] | None = None) -> dict[str, Any]:
        result = self.result
        if fatal is not None:
            result = dataclasses.replace(result, config=dataclasses.replace(result.config, fatal_faults=fatal))
        return {v.name: v for v in judge(result, load_budgets(None))}

    def summary(self) -> str:
        rep = self.rep
        return (
            f"outcomes={ {k: v for k, v in rep['outcomes'].items() if v} } errors={ {k: v['count'] for k, v in rep['errors'].items()} } "
            f"attempts={rep['attempts']} e2e_p50={self.p50() if self.e2e().size else None} "
            f"faults={[(f['spec'], f['applied_at_s'], f['removed_at_s'], f['error']) for f in rep['faults']['applied']]} "
            f"log={ {n: c.count for n, c in self.log_classes().items()} } examples={self.examples()}"
        )


@pytest.fixture(scope="session")
def shared(tmp_path_factory):
    """One stack (router, Toxiproxy edge/backend, SkyRL 0.4.0) for every trial in this module."""
    require_target("0.4.0")
    require_toxiproxy()
    root = tmp_path_factory.mktemp("fl")
    (root / "targets").symlink_to(TARGETS, target_is_directory=True)
    (root / "tools").symlink_to(WORKDIR / "tools", target_is_directory=True)
    workspace = Workspace(root)
    config = _config()
    stack = Stack(config.stack_config(), config.router, workspace).start()
    try:
        yield stack, workspace
    finally:
        errors = stack.close()
        assert errors == [], errors


def _run(
    shared, faults: tuple[str, ...] = (), fatal: tuple[str, ...] = (), check_faults: bool = True, **shape
) -> Trial:
    stack, workspace = shared
    before = stack.router.stats()
    result = run_trial(_config(faults, fatal, **shape), workspace, stack=stack)
    trial = Trial(result, report.build_report(result), before)
    assert result.error is None and not result.interrupted, trial.summary()
    assert result.cleanup_errors == [], result.cleanup_errors
    if faults and check_faults:
        for record in result.fault_log.records:
            assert record.applied and record.error is None, record
            assert record.removed_at_s is not None and record.remove_error is None, record
    return trial


@pytest.fixture(scope="session")
def baselines(shared):
    """Fault-free trials of each shape used below, each run once, lazily, on the shared stack."""
    cache: dict[str, Trial] = {}

    def get(name: str, faults: tuple[str, ...] = (), **shape) -> Trial:
        if name not in cache:
            trial = _run(shared, faults, **shape)
            assert trial.rep["completed"] == trial.rep["requested"], trial.summary()
            assert trial.rep["attempts"]["transport_errors"] == 0, trial.summary()
            cache[name] = trial
        return cache[name]

    return get


def _all_ok(trial: Trial) -> None:
    rep = trial.rep
    assert rep["completed"] == rep["requested"], trial.summary()
    assert rep["outcomes"]["corrupt"] == 0, trial.summary()
    verdicts = trial.verdicts()
    assert verdicts["result_integrity"].ok is True, verdicts["result_integrity"].detail
    assert verdicts["no_lost_results"].ok is True, verdicts["no_lost_results"].detail


def _gain(trial: Trial, base: Trial) -> float:
    return trial.p50() - base.p50()


# --------------------------------------------------------------------------- latency


def test_latency_edge_adds_its_delay_to_each_round_trip(shared, baselines):
    """500 ms downstream latency on the edge delays both answers a request waits for (the asample
    response and the retrieve_future result): e2e p50 must rise by >= 60 % of 2 x 0.5 s."""
    base = baselines("small", **SMALL)
    trial = _run(shared, ("edge:latency:latency=500",), **{**SMALL, "requests": 64})
    _all_ok(trial)
    round_trips = 2
    assert _gain(trial, base) >= 0.6 * round_trips * 0.5, (base.p50(), trial.summary())
    assert trial.rep["attempts"]["transport_errors"] == 0, trial.summary()


def test_latency_backend_slows_every_forward(shared, baselines):
    """500 ms latency on the backend (router -> server) delays each forward's answer once:
    e2e p50 rises by >= 60 % of 0.5 s, with no errors at the client."""
    base = baselines("small", **SMALL)
    trial = _run(shared, ("backend:latency:latency=500",), **{**SMALL, "requests": 64})
    _all_ok(trial)
    assert _gain(trial, base) >= 0.6 * 0.5, (base.p50(), trial.summary())
    assert trial.rep["attempts"]["transport_errors"] == 0, trial.summary()


# --------------------------------------------------------------------------- bandwidth and slicer


def test_bandwidth_edge_slows_large_results(shared, baselines):
    """32 KB/s on the edge: a ~32 KB proto result needs ~1 s to cross; e2e p50 rises by
    >= 50 % of result_bytes / rate, and every result is still whole and correct."""
    base = baselines("big", **BIG)
    trial = _run(shared, ("edge:bandwidth:rate=32",), **BIG)
    _all_ok(trial)
    result_bytes = float(np.median(trial.history["result_bytes"]))
    assert result_bytes > 16_000, result_bytes
    assert result_bytes == float(np.median(base.history["result_bytes"]))
    assert _gain(trial, base) >= 0.5 * result_bytes / 32_000, (base.p50(), result_bytes, trial.summary())


def test_bandwidth_backend_slows_forwards(shared, baselines):
    """64 KB/s on the backend: each forward's JSON body (router bytes_out / completions, ~60 KB)
    takes about body / rate to reach the server; e2e p50 rises by >= 50 % of that."""
    base = baselines("big", **BIG)
    trial = _run(shared, ("backend:bandwidth:rate=64",), **BIG)
    _all_ok(trial)
    body = trial.router_delta("bytes_out") / max(1, trial.router_delta("completed"))
    assert body > 32_000, body
    assert _gain(trial, base) >= 0.5 * body / 64_000, (base.p50(), body, trial.summary())


def test_slicer_edge_splits_results_and_keeps_them_intact(shared, baselines):
    """slicer 64 B / 2 ms on the edge cuts a ~32 KB result into ~500 slices sent 2 ms apart:
    every result still arrives whole and correct (integrity verdict ok, same result bytes), and
    e2e p50 rises by >= 50 % of (result_bytes / 64) x 2 ms."""
    base = baselines("big", **BIG)
    trial = _run(shared, ("edge:slicer:average_size=64,delay=2000",), **BIG)
    _all_ok(trial)
    result_bytes = float(np.median(trial.history["result_bytes"]))
    assert np.all(trial.history["result_bytes"] == base.history["result_bytes"][0]), "result sizes changed"
    assert trial.rep["attempts"]["transport_errors"] == 0, trial.summary()
    assert _gain(trial, base) >= 0.5 * (result_bytes / 64) * 0.002, (base.p50(), trial.summary())


def test_slicer_backend_splits_forwards_and_keeps_them_intact(shared, baselines):
    """slicer 64 B / 1 ms on the backend slices each forward's JSON body: the server still parses
    every body (all OK, integrity ok, clean server log), and e2e p50 rises by >= 50 % of
    (body / 64) x 1 ms."""
    base = baselines("big", **BIG)
    trial = _run(shared, ("backend:slicer:average_size=64,delay=1000",), **BIG)
    _all_ok(trial)
    body = trial.router_delta("bytes_out") / max(1, trial.router_delta("completed"))
    assert trial.log_classes() == {}, trial.summary()
    assert _gain(trial, base) >= 0.5 * (body / 64) * 0.001, (base.p50(), body, trial.summary())


# --------------------------------------------------------------------------- slow_close

ABANDON = dict(requests=100, max_outstanding=16, result_tokens=16, abandon_polls=PollBehaviour(1.0, 1.0))
HELPER_LATENCY = "backend:latency:latency=500"  # keeps each first poll open past the 0.25 s abandon point


def test_slow_close_edge_keeps_abandoned_connections_open_at_the_server(shared, baselines):
    """slow_close only acts when a side closes. The client closes a connection mid-trial when it
    abandons a poll (every request here abandons its first poll, held open by 500 ms of backend
    latency, and re-polls). With slow_close 2 s on the edge's *upstream* (client -> server)
    stream, the proxy passes that close on to the server 2 s late, so the server holds each
    abandoned connection 2 s longer: its peak fd count rises by at least one connection per
    request in flight (16) over the same trial without slow_close.

    On the downstream stream the delayed close goes towards the client, which has already gone:
    nothing of it reaches the server or the client, so that direction is not observable here."""
    base = baselines("abandon", (HELPER_LATENCY,), **ABANDON)
    trial = _run(shared, (HELPER_LATENCY, "edge:slow_close:delay=2000,stream=upstream"), **ABANDON)
    _all_ok(trial)
    assert trial.rep["attempts"]["repolls"] >= 100, trial.summary()  # the abandons happened
    base_peak, peak = base.rep["server"]["peak_fds"], trial.rep["server"]["peak_fds"]
    assert peak - base_peak >= ABANDON["max_outstanding"], (base_peak, peak, trial.summary())


DELAYED = dict(requests=32, max_outstanding=32, result_tokens=16, delay_polls=PollBehaviour(1.0, 60.0))


def _router_fds(stack: Stack) -> int:
    total = 0
    for pid in stack.router.pids():
        try:
            total += psutil.Process(pid).num_fds()
        except psutil.Error:
            pass
    return total


def _trial_with_router_fds(shared, faults: tuple[str, ...]) -> tuple[Trial, list[tuple[float, int]]]:
    """Run a DELAYED trial while sampling the router's open fds (epoch s, fds) every 0.1 s."""
    stack, _ = shared
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.1):
            samples.append((time.time(), _router_fds(stack)))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        trial = _run(shared, faults, **DELAYED)
    finally:
        stop.set()
        thread.join(5.0)
    return trial, samples


def _median_between(samples: list[tuple[float, int]], t0_epoch: float, lo: float, hi: float) -> float:
    values = [fds for ts, fds in samples if t0_epoch + lo <= ts <= t0_epoch + hi]
    assert len(values) >= 3, f"too few router fd samples in [{lo}, {hi}] s: {samples[:5]}..."
    return float(np.median(values))


def test_slow_close_backend_keeps_router_connections_open(shared):
    """The backend closes mid-trial only when the server drops an idle pooled forward connection
    (aiohttp keep-alive 2 s, swept every 2 s). Here all 32 requests forward at once, then every
    first poll is delayed 6 s, so the server's 32 forward connections go idle and are closed
    2-4 s in. With slow_close 5 s on the backend's upstream (server -> router) stream the
    proxy passes those closes on to the router 5 s late: between 4.5 s and 5.8 s the router
    process still holds them (fds sampled with psutil), while without the toxic it has
    already let them go. The server's own fds are not affected (it closed its side itself)."""
    base, base_samples = _trial_with_router_fds(shared, ())
    trial, samples = _trial_with_router_fds(shared, ("backend:slow_close:delay=5000,stream=upstream",))
    for t in (base, trial):
        _all_ok(t)
    base_fds = _median_between(base_samples, base.result.start_epoch, 4.5, 5.8)
    fds = _median_between(samples, trial.result.start_epoch, 4.5, 5.8)
    assert fds - base_fds >= 8, (base_fds, fds, trial.summary())


# --------------------------------------------------------------------------- timeout


def test_timeout_edge_holds_answers_until_client_timeouts(shared):
    """timeout=0 on the edge drops every answer while in force: no request completes inside the
    window; the polls held there hit the client's own 4.5 s timeout (a 'timeout' error), and
    when the toxic goes Toxiproxy closes what it held (resets). The client re-polls or
    re-submits and every request still completes, correct."""
    trial = _run(shared, ("edge:timeout:timeout=0@0.5+5.5",), requests=400, max_outstanding=16, result_tokens=16)
    _all_ok(trial)
    record = trial.record()
    # 0.5 s of slack: a result read just before the toxic may be stamped late by a busy client loop
    assert trial.done_between(record.applied_at_s + 0.5, record.removed_at_s) == 0, trial.summary()
    assert trial.done_between(record.removed_at_s, np.inf) > 0, trial.summary()
    assert "timeout" in trial.examples(), trial.summary()
    attempts = trial.rep["attempts"]
    assert attempts["transport_errors"] > 0 and attempts["repolls"] + attempts["submit_retries"] > 0, trial.summary()
    fault = trial.rep["faults"]["applied"][0]
    assert fault["requests_with_errors"] > 0 and fault["retries_caused"] > 0, fault


def test_timeout_backend_holds_forwards_then_fails_them(shared):
    """timeout=0 on the backend holds the router's answers; the forwards in flight wait, and fail
    ('Server disconnected') only when the toxic is removed and Toxiproxy closes their
    connections: so the server logs the first failure no earlier than the removal. The
    requests fail (FAILED, server_failed), which the declared fatal fault explains; requests
    started after the window complete."""
    fatal = ("backend:timeout",)
    trial = _run(shared, ("backend:timeout:timeout=0@0.5+1",), fatal, requests=200, max_outstanding=4, result_tokens=16)
    rep = trial.rep
    record = trial.record()
    assert rep["outcomes"]["failed"] > 0, trial.summary()
    assert rep["errors"].get("server_failed", {}).get("count") == rep["outcomes"]["failed"], trial.summary()
    assert rep["outcomes"]["ok"] + rep["outcomes"]["failed"] == rep["requested"], trial.summary()
    classes = trial.log_classes()
    assert classes, trial.summary()
    first = min(c.first_ts for c in classes.values() if c.first_ts is not None) - trial.result.start_epoch
    assert first >= record.removed_at_s - 0.2, (first, record, trial.summary())
    after = trial.started_after(record.removed_at_s + 0.5)
    assert after.sum() > 0 and np.all(trial.history["outcome"][after] == Outcome.OK), trial.summary()
    assert trial.verdicts()["no_lost_results"].ok is True
    assert trial.verdicts(fatal=())["no_lost_results"].ok is False  # without the declaration: a loss


# --------------------------------------------------------------------------- reset_peer


def test_reset_peer_edge_causes_retries_and_all_complete(shared):
    """reset_peer on the edge resets client connections as answers arrive: transport errors
    (reset) and retries at the client, attributed to the fault in the report, yet every request
    completes with a correct result."""
    trial = _run(shared, ("edge:reset_peer:timeout=0@0.5+1",), requests=600, max_outstanding=16, result_tokens=16)
    _all_ok(trial)
    attempts = trial.rep["attempts"]
    assert attempts["transport_errors"] > 0, trial.summary()
    assert "reset" in trial.examples(), trial.summary()
    fault = trial.rep["faults"]["applied"][0]
    assert fault["requests_with_errors"] > 0 and fault["retries_caused"] > 0, fault
    record = trial.record()
    after = trial.started_after(record.removed_at_s + 0.5)
    assert after.sum() > 0 and np.all(trial.history["transport_errors"][after] == 0), trial.summary()


def test_reset_peer_backend_fails_forwards(shared):
    """reset_peer on the backend resets the server's forward connections when the router answers:
    the forwards fail at once (logged inside the window, class connection_reset), their
    requests end FAILED with the server's error (server_failed); after the window forwards
    succeed again."""
    fatal = ("backend:reset_peer",)
    trial = _run(
        shared, ("backend:reset_peer:timeout=0@0.5+1",), fatal, requests=200, max_outstanding=4, result_tokens=16
    )
    rep = trial.rep
    record = trial.record()
    assert rep["outcomes"]["failed"] > 0, trial.summary()
    assert rep["errors"]["server_failed"]["count"] == rep["outcomes"]["failed"], trial.summary()
    classes = trial.log_classes()
    assert "connection_reset" in classes, trial.summary()
    first = classes["connection_reset"].first_ts - trial.result.start_epoch
    assert record.applied_at_s - 0.1 <= first <= record.removed_at_s, (first, record)
    after = trial.started_after(record.removed_at_s + 0.5)
    assert after.sum() > 0 and np.all(trial.history["outcome"][after] == Outcome.OK), trial.summary()
    assert trial.verdicts()["no_lost_results"].ok is True


# --------------------------------------------------------------------------- limit_data


def test_limit_data_edge_cuts_answers_mid_body(shared):
    """limit_data 100 B on the edge closes each client connection after 100 bytes: the client sees
    answers cut mid-response (reset / decode errors), retries, and every request completes with a
    correct result (none accepted as corrupt)."""
    trial = _run(shared, ("edge:limit_data:bytes=100@0.5+1",), requests=600, max_outstanding=16, result_tokens=16)
    _all_ok(trial)
    assert trial.rep["attempts"]["transport_errors"] > 0, trial.summary()
    seen = set(trial.examples())
    assert seen & {"reset", "decode"}, trial.summary()
    assert seen <= {"reset", "decode", "connect", "timeout"}, trial.summary()


def test_limit_data_backend_fails_forwards(shared):
    """limit_data 100 B on the backend cuts each forward's answer after 100 bytes: the server
    cannot read the body, the forward fails (not retried: it may have executed) and the request
    ends FAILED with the server's error message as its result (server_failed)."""
    fatal = ("backend:limit_data",)
    trial = _run(
        shared, ("backend:limit_data:bytes=100@0.5+1",), fatal, requests=200, max_outstanding=4, result_tokens=16
    )
    rep = trial.rep
    assert rep["outcomes"]["failed"] > 0, trial.summary()
    assert set(rep["errors"]) == {"server_failed"}, trial.summary()
    assert rep["errors"]["server_failed"]["count"] == rep["outcomes"]["failed"], trial.summary()
    assert "Backend-forwarded sample failed" in "".join(c.example for c in trial.log_classes().values()), (
        trial.summary()
    )
    record = trial.record()
    after = trial.started_after(record.removed_at_s + 0.5)
    assert after.sum() > 0 and np.all(trial.history["outcome"][after] == Outcome.OK), trial.summary()
    assert trial.verdicts()["no_lost_results"].ok is True


# --------------------------------------------------------------------------- down


def test_down_edge_refuses_connections_then_recovers(shared):
    """edge down: the proxy stops listening and drops its connections: the client meets
    connection-refused errors (and resets of the dropped keep-alive connections) during the window,
    backs off and retries; every request completes, and requests started after the proxy is
    back meet no transport error."""
    trial = _run(shared, ("edge:down@0.5+1",), requests=600, max_outstanding=16, result_tokens=16)
    _all_ok(trial)
    assert "connect" in trial.examples(), trial.summary()
    assert trial.rep["attempts"]["transport_errors"] > 0, trial.summary()
    record = trial.record()
    after = trial.started_after(record.removed_at_s + 0.5)
    assert after.sum() > 0 and np.all(trial.history["transport_errors"][after] == 0), trial.summary()


def test_down_backend_fails_forwards_then_recovers(shared):
    """backend down: the forwards on dropped connections fail ('Server disconnected'), and new
    forwards meet connection refused, which the server retries once before failing (a WARNING
    then an ERROR, both in the connect_error class). Requests end FAILED (server_failed); those
    started after the proxy is back complete."""
    fatal = ("backend:down",)
    trial = _run(shared, ("backend:down@0.5+3",), fatal, requests=150, max_outstanding=2, result_tokens=16)
    rep = trial.rep
    assert rep["outcomes"]["failed"] > 0, trial.summary()
    assert set(rep["errors"]) == {"server_failed"}, trial.summary()
    classes = trial.log_classes()
    assert classes and set(classes) <= {"connection_reset", "connect_error"}, trial.summary()
    if "connect_error" in classes:  # the refused ones: "retrying once" warning + the failure
        assert classes["connect_error"].count >= 2, trial.summary()
    record = trial.record()
    after = trial.started_after(record.removed_at_s + 0.5)
    assert after.sum() > 0 and np.all(trial.history["outcome"][after] == Outcome.OK), trial.summary()
    assert trial.verdicts()["no_lost_results"].ok is True


# --------------------------------------------------------------------------- router faults


def test_router_stall_pauses_completions_then_recovers(shared):
    """router stall 1.5 s: the router answers nothing while it lasts, so no request completes inside
    the window; then everything proceeds and all requests complete, correct, without errors."""
    trial = _run(shared, ("router:stall@0.5+1.5",), requests=400, max_outstanding=16, result_tokens=16)
    _all_ok(trial)
    record = trial.record()
    stall_end = min(record.removed_at_s, record.applied_at_s + 1.5)
    assert trial.done_between(record.applied_at_s + 0.5, stall_end - 0.05) == 0, trial.summary()
    assert trial.done_between(0, record.applied_at_s) > 0, trial.summary()
    assert trial.done_between(stall_end, np.inf) > 0, trial.summary()
    assert trial.rep["attempts"]["transport_errors"] == 0, trial.summary()


def test_router_errors_are_retried_once_then_fail(shared):
    """router answers 503 for 1 s: the server retries a 5xx forward exactly once (a WARNING per
    retry), then fails the request (FAILED, server_failed). So the router injected at least two
    errors per failed request, and the server warned at least once per failed request."""
    fatal = ("router:errors",)
    trial = _run(shared, ("router:errors:status=503@0.5+1",), fatal, requests=200, max_outstanding=4, result_tokens=16)
    rep = trial.rep
    failed = rep["outcomes"]["failed"]
    assert failed > 0, trial.summary()
    assert set(rep["errors"]) == {"server_failed"} and rep["errors"]["server_failed"]["count"] == failed, (
        trial.summary()
    )
    assert "503" in rep["errors"]["server_failed"]["example"], rep["errors"]
    injected = trial.router_delta("errors_injected")
    assert injected >= 2 * failed, (injected, failed, trial.summary())
    assert trial.result.server_log.warnings >= failed, trial.summary()
    assert trial.verdicts()["no_lost_results"].ok is True


def test_router_truncate_fails_each_truncated_forward(shared):
    """router truncates every 200 body to half for 1 s: the server cannot parse it ('non-JSON'),
    does not retry, and fails the request: exactly one FAILED request (server_failed) per
    truncated body."""
    fatal = ("router:truncate",)
    trial = _run(shared, ("router:truncate@0.5+1",), fatal, requests=200, max_outstanding=4, result_tokens=16)
    rep = trial.rep
    failed = rep["outcomes"]["failed"]
    assert failed > 0, trial.summary()
    assert set(rep["errors"]) == {"server_failed"}, trial.summary()
    assert "non-JSON" in rep["errors"]["server_failed"]["example"], rep["errors"]
    assert trial.router_delta("truncated") == failed, (trial.router_delta("truncated"), trial.summary())
    assert trial.verdicts()["no_lost_results"].ok is True


def test_router_crash_fails_forwards_then_recovers_after_restart(shared):
    """router killed for 1.5 s: the backend proxy can no longer reach it, so the server's forwards
    fail (FAILED, server_failed; 'Server disconnected' / connect errors in its log); the runner
    restarts the router at the window's end, requests started after that complete, and the
    restarted router outlives the trial (a later trial on the same stack works)."""
    stack, _ = shared
    old_pid = stack.router.pid
    fatal = ("router:crash",)
    trial = _run(shared, ("router:crash@0.5+1.5",), fatal, requests=200, max_outstanding=4, result_tokens=16)
    rep = trial.rep
    record = trial.record()
    assert rep["outcomes"]["failed"] > 0, trial.summary()
    assert set(rep["errors"]) == {"server_failed"}, trial.summary()
    classes = trial.log_classes()
    assert classes and set(classes) <= {"connection_reset", "connect_error"}, trial.summary()
    after = trial.started_after(record.removed_at_s + 0.5)
    assert after.sum() > 0 and np.all(trial.history["outcome"][after] == Outcome.OK), trial.summary()
    assert trial.verdicts()["no_lost_results"].ok is True
    assert stack.router.pid != old_pid
    assert stack.router.stats()["received"] >= 1  # the new router answers after the trial
    again = _run(shared, requests=50, max_outstanding=16, result_tokens=16)
    assert again.rep["completed"] == 50, again.summary()
