"""Judge a finished trial: feed its history, samples, faults and log to the invariants.

Kept apart from ``faultload/run/trial.py`` (which only runs and records) and from
the checkers (pure functions): this is the one place that knows how a
``TrialResult`` (``faultload.record.trial``: a live trial and a stored one alike)
maps onto ``CheckInputs``, so a stored trial can be re-judged. The checker package
reads recorded data and never imports the trial runner.
"""

from __future__ import annotations

import time

from faultload.checker.budgets import Budgets
from faultload.checker.compose import check_all, checkers_for
from faultload.checker.inputs import CheckInputs, Verdict
from faultload.model.family import CONTRACTS
from faultload.record.trial import TrialResult


def collapse_verdict(result: TrialResult) -> Verdict:
    """The watchdog recognised no collapse (fd exhaustion, stall, ...): the ``no_collapse`` verdict.

    Figure: 1 when a collapse was called, else 0; budget 0.
    """
    if result.verdict is None:
        return Verdict(name="no_collapse", ok=True, figure=0, budget=0, head="the watchdog saw no collapse")
    return Verdict(name="no_collapse", ok=False, figure=1, budget=0, head=result.verdict.line())


def error_examples(result: TrialResult) -> dict[str, str]:
    """Error class key -> the first message of that class any load worker kept (workers in order)."""
    examples: dict[str, str] = {}
    for worker in result.workers:
        for key, message in worker.error_examples.items():
            examples.setdefault(key, message)
    return examples


def judge(result: TrialResult, budgets: Budgets) -> list[Verdict]:
    """Every invariant's verdict on ``result``, the collapse last.

    The one place every caller judges through (``faultload run``, the suite,
    comparisons, replays, ``faultload check``), so the seconds it takes are
    timed here: they go to ``result.phases_s["judge"]`` (after the trial's own
    phases, outside its ``wall_s``), where the report reads them.
    """
    started = time.monotonic()
    config = result.config
    # our router answered every forward of a server we launched (an empty log: it completed none);
    # a server someone else started forwards to its own backend, whose completions we do not see
    ours = config.spec.kind != "url"
    inputs = CheckInputs(
        history=result.history,
        monitor=result.monitor,
        faults=result.fault_log,
        shape=config.shape,
        contract=CONTRACTS[config.spec.family],
        server_log=result.server_log,
        fatal_fault_kinds=frozenset(config.fatal_faults),
        interrupted=result.interrupted or result.stopped_early,
        load_stopped_s=result.load_stopped_s,
        trial_start_epoch=result.start_epoch,
        router_peak_in_flight=result.router_stats.get("peak_in_flight"),
        forwarding_cap=config.knobs.forwarding_max_connections,
        router_completed_s=dict(result.router_completed_s) if ours else None,
        router_repeats=dict(result.router_repeats) if ours and result.router_repeats is not None else None,
        router_answer_bound_s=config.router.answer_bound_s(config.shape.requests),
        router_least_hold_s=config.router.least_hold_s(),
        error_examples=error_examples(result),
        training=result.training,
    )
    verdicts = [*check_all(inputs, budgets, checkers_for(inputs)), collapse_verdict(result)]
    result.phases_s["judge"] = time.monotonic() - started
    return verdicts
