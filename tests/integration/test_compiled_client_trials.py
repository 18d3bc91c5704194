"""Integration: the compiled client against the Python one, on the same deterministic faulted trials.

Each trial runs twice (time scale 0.05) on ONE shared stack (router + Toxiproxy edge/backend proxies + the real SkyRL 0.4.0 server,
started once for the module): with ``--client raw-python`` (the reference) and ``--client raw`` (the compiled
client, faultload/client/go). Every fault covers the whole load, so every request meets the same thing whichever
client sends it and however the machine schedules it: each request's outcome and last error class must be the
same under both, its attempt count close (a retry loop that ends on a timer may fit one attempt more or less),
and the trial's verdicts and error classes the same. Durations are never compared.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from conftest import TARGETS, WORKDIR, require_compiled_client, require_target, require_toxiproxy

from faultload.checker.budgets import load_budgets
from faultload.checker.judge import judge
from faultload.host.workspace import Workspace
from faultload.model.faults import FaultSchedule
from faultload.model.router import RouterConfig
from faultload.model.shape import LoadShape, PollBehaviour
from faultload.model.trial import ServerKnobs, TrialConfig
from faultload.record.history import ErrorClass, Outcome
from faultload.run.stack import Stack
from faultload.run.trial import TrialResult, run_trial

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TARGET = "skyrl==0.4.0"
KNOBS = ServerKnobs(forwarding_timeout_s=5.0)  # a held forward never hangs a trial
REQUESTS = 24
TIME_SCALE = 0.05  # one scale for every trial: a shared stack's server runs its timers at it
ATTEMPT_SLACK = 2  # attempts a timer-bound retry loop may fit more or fewer (backoffs end on the clock)


def _config(client: str, faults: tuple[str, ...], router: RouterConfig, **shape: Any) -> TrialConfig:
    shape = {"requests": REQUESTS, "max_outstanding": 0, "result_tokens": 16, "seed": 7, **shape}
    return TrialConfig(
        target=TARGET,
        shape=LoadShape(time_scale=TIME_SCALE, client=client, **shape),
        router=router,
        faults=FaultSchedule.parse(list(faults)),
        proxies="on",
        knobs=KNOBS,  # drain_s the default: a trial that ends sooner after its last connection is drained alike
        max_wall_s=90.0,
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    require_target("0.4.0")
    require_toxiproxy()
    require_compiled_client()
    root = tmp_path_factory.mktemp("fl")
    (root / "targets").symlink_to(TARGETS, target_is_directory=True)
    (root / "tools").symlink_to(WORKDIR / "tools", target_is_directory=True)
    workspace = Workspace(root)
    config = _config("raw", (), RouterConfig(gen_seconds=0.05))
    running = Stack(config.stack_config(), config.router, workspace).start()
    try:
        yield running, workspace
    finally:
        errors = running.close()
        assert errors == [], errors


def _both(stack, faults: tuple[str, ...], router: RouterConfig, **shape: Any):
    running, workspace = stack
    results = {}
    for client in ("raw-python", "raw"):
        config = _config(client, faults, router, **shape)
        results[client] = run_trial(config, workspace, stack=running)
        assert not results[client].error, results[client].error
    return results["raw-python"], results["raw"]


def _impl(result: TrialResult) -> set[str | None]:
    return {w.client_impl for w in result.workers}


def _same(python: TrialResult, compiled: TrialResult) -> None:
    """Per request (by nonce: both runs draw the same salt): the same outcome and error class, attempts close;
    the same verdicts for the trial. Not the classes of every attempt: the compiled client's first requests
    leave sooner after the start, and may meet a fault's first moment (a connection reset as the proxy goes
    down) the Python client's never do."""
    assert _impl(python) == {"python"} and _impl(compiled) == {"compiled"}
    a, b = python.history, compiled.history
    order_a, order_b = np.argsort(a["nonce"]), np.argsort(b["nonce"])
    assert a["nonce"][order_a].tolist() == b["nonce"][order_b].tolist()
    assert a["outcome"][order_a].tolist() == b["outcome"][order_b].tolist()
    assert a["error"][order_a].tolist() == b["error"][order_b].tolist()
    gap = np.abs(a["attempts"][order_a].astype(int) - b["attempts"][order_b].astype(int))
    assert int(gap.max()) <= ATTEMPT_SLACK, gap.tolist()
    for result in (python, compiled):  # every class a request ended with has its example
        ended = {ErrorClass(e).key for e in result.history["error"].tolist() if e}
        assert ended <= set().union(*(w.error_examples for w in result.workers))
    budgets = load_budgets(None)
    verdicts = [{v.name: (v.ok, v.detail) for v in judge(r, budgets)} for r in (python, compiled)]
    assert {k: ok for k, (ok, _) in verdicts[0].items()} == {k: ok for k, (ok, _) in verdicts[1].items()}, verdicts


def _outcomes(result: TrialResult) -> set[tuple[int, int]]:
    h = result.history
    return set(zip(h["outcome"].tolist(), h["error"].tolist()))


def test_edge_down_rejects_every_request_alike(stack):
    python, compiled = _both(stack, ("edge:down",), RouterConfig(gen_seconds=0.05))
    assert _outcomes(python) == {(Outcome.REJECTED, ErrorClass.CONNECT)}
    _same(python, compiled)


def test_edge_resets_reject_every_request_alike(stack):
    python, compiled = _both(stack, ("edge:reset_peer:timeout=0",), RouterConfig(gen_seconds=0.05))
    assert _outcomes(python) == {(Outcome.REJECTED, ErrorClass.RESET)}
    _same(python, compiled)


def test_poll_timeouts_then_results_alike(stack):
    """Every generation takes 3.5 s, past the client's 2.25 s poll timeout (45 SDK s; SkyRL holds a poll 15 s)
    and under the server's 5 s forwarding timeout: each request's first poll times out (backed off, polled
    again), then its result arrives."""
    python, compiled = _both(stack, (), RouterConfig(gen_seconds=3.5))
    assert _outcomes(python) == {(Outcome.OK, ErrorClass.TIMEOUT)}
    assert int(python.history["repolls"].min()) > 0
    _same(python, compiled)


def test_router_errors_fail_every_request_alike(stack):
    python, compiled = _both(stack, ("router:errors:status=503",), RouterConfig(gen_seconds=0.05))
    assert {outcome for outcome, _ in _outcomes(python)} == {Outcome.FAILED}
    _same(python, compiled)


def test_abandoned_first_polls_alike(stack):
    """Every first poll is dropped by the client at 0.25 s (each generation takes 1 s, the server holds the poll
    meanwhile), then polled again to its result."""
    python, compiled = _both(stack, (), RouterConfig(gen_seconds=1.0), abandon_polls=PollBehaviour(1.0, 0.5))
    for result in (python, compiled):
        kinds = result.history.attempts["kind"]
        assert int(np.count_nonzero(kinds == 2)) == REQUESTS  # one ABANDONED attempt per request
    assert _outcomes(python) == {(Outcome.OK, ErrorClass.NONE)}
    _same(python, compiled)


def test_the_clients_are_not_the_same_run_twice(stack):
    """The comparison means something: the two runs of a trial ran different implementations."""
    python, compiled = _both(stack, (), RouterConfig(gen_seconds=0.05))
    assert _impl(python) != _impl(compiled)
    assert dataclasses.replace(python.config, shape=compiled.config.shape) == compiled.config
