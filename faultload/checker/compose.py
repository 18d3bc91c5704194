"""The invariants as one list (:data:`CHECKERS`), run together, merged and reported.

Checkers, in :data:`CHECKERS` order:

* ``no_lost_results`` — every request the server accepted ends OK;
* ``accepted_requests`` — every asample is accepted unless a fatal fault was in force;
* ``result_integrity`` — no result belonged to another request or was damaged;
* ``bounded_fds`` / ``bounded_rss`` — peak within a budget of the in-flight
  count, and back near the baseline after drain;
* ``healthz_latency`` — ``/healthz`` p99 and failures during load;
* ``bounded_cpu`` — server CPU per HTTP request;
* ``retry_amplification`` — HTTP attempts per request;
* ``unprovoked_resets`` — no attempt reset or refused on a healthy network;
* ``clean_server_log`` — no error lines unless a fault was active;
* ``futures_resolve`` — every accepted request ends within a bound of its release (liveness);
* ``polls_held`` — no poll answered 408 before the server's hold time;
* ``forwarded_once`` — no prompt completed by the router twice unless its first answer could be lost;
* ``forwards_concurrent`` — what the server owes the router is forwarded at once, up to its configured cap;
* ``releases_results`` — once every result is past its TTL and a sweep, the server's RSS is back near its start;

and, for a trial that ran a training mix only (:func:`checkers_for`),
``training_futures`` and ``heartbeats_answered`` (``checker/training.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Sequence

from faultload.checker.accepted import check_accepted_requests
from faultload.checker.budgets import Budgets
from faultload.checker.forwards import check_forwarded_once, check_forwards_concurrent
from faultload.checker.futures import check_futures_resolve, check_polls_held
from faultload.checker.health import check_healthz_latency
from faultload.checker.inputs import Checker, CheckInputs, Verdict
from faultload.checker.releases import check_releases_results
from faultload.checker.resources import check_bounded_cpu, check_bounded_fds, check_bounded_rss
from faultload.checker.results import check_no_lost_results, check_result_integrity
from faultload.checker.retries import check_retry_amplification, check_unprovoked_resets
from faultload.checker.serverlog import check_clean_server_log
from faultload.checker.training import TRAINING_CHECKERS
from faultload.checker.wording import one_line

CHECKERS: tuple[tuple[str, Checker], ...] = (
    ("no_lost_results", check_no_lost_results),
    ("accepted_requests", check_accepted_requests),
    ("result_integrity", check_result_integrity),
    ("bounded_fds", check_bounded_fds),
    ("bounded_rss", check_bounded_rss),
    ("healthz_latency", check_healthz_latency),
    ("bounded_cpu", check_bounded_cpu),
    ("retry_amplification", check_retry_amplification),
    ("unprovoked_resets", check_unprovoked_resets),
    ("clean_server_log", check_clean_server_log),
    ("futures_resolve", check_futures_resolve),
    ("polls_held", check_polls_held),
    ("forwarded_once", check_forwarded_once),
    ("forwards_concurrent", check_forwards_concurrent),
    ("releases_results", check_releases_results),
)


def checkers_for(inputs: CheckInputs) -> tuple[tuple[str, Checker], ...]:
    """:data:`CHECKERS`, plus the training path's when the trial trained (never an "ok" for what did not run)."""
    return CHECKERS + (TRAINING_CHECKERS if inputs.training is not None else ())


def check_all(
    inputs: CheckInputs,
    budgets: Budgets,
    checkers: Sequence[tuple[str, Checker]] = CHECKERS,
) -> list[Verdict]:
    """Run every checker; one that raises (or returns something else than a Verdict) gives ok=None."""
    verdicts = []
    for name, checker in checkers:
        try:
            verdict = checker(inputs, budgets)
            if not isinstance(verdict, Verdict) or verdict.ok not in (True, False, None):
                raise TypeError(f"returned {verdict!r} instead of a Verdict")
            verdict = dataclasses.replace(verdict, name=name)  # the name is where the checker is registered
        except Exception as exc:  # a crashing checker is "unknown", never "ok"
            verdict = Verdict(
                name=name,
                ok=None,
                figure=None,
                budget=None,
                head=one_line(f"checker crashed: {type(exc).__name__}: {exc}"),
            )
        verdicts.append(verdict)
    return verdicts


def overall(verdicts: Iterable[Verdict]) -> bool | None:
    """False if any verdict is violated, else None if any is unknown, else True (Jepsen's merge)."""
    result: bool | None = True
    for verdict in verdicts:
        if verdict.ok is False:
            return False
        if verdict.ok is None:
            result = None
    return result


def to_report(verdicts: Iterable[Verdict]) -> list[dict[str, Any]]:
    """``[{name, ok, figure, budget, detail, head, notes, cases}]``, JSON-ready (NaN/inf figures become null)."""
    return [v.to_dict() for v in verdicts]
