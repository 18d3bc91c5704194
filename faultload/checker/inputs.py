"""What a checker reads (:class:`CheckInputs`) and what it answers (:class:`Verdict`).

Plain values only, so a stored trial can be re-judged without running anything
(``faultload.store.bundle`` loads one, ``faultload check`` judges it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.model.family import ServerContract
from faultload.model.shape import LoadShape
from faultload.record.history import History
from faultload.record.serverlog import ServerLogSummary
from faultload.record.training import TrainingLog

if TYPE_CHECKING:  # type-only: keeps this module cheap to import (no toxiproxy client, no psutil)
    from faultload.record.faults import FaultLog
    from faultload.record.samples import MonitorSamples


# The longest detail line a verdict renders (reports, JUnit, the terminal): one line, never a dump.
DETAIL_MAX = 1000


@dataclass(frozen=True)
class RuleCase:
    """A rule of the contract as one trial's verdict applied it: its name and how many requests it covered."""

    rule: str
    rows: int


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """One invariant's answer, as data: ``ok=None`` means unknown (crashed, or not enough data).

    ``figure`` is the measured number compared with ``budget``; ``head`` says what was found (requests by
    nonce and server id, times), each of ``notes`` what was explained or left unjudged, and ``cases`` which
    rules of the contract covered how many requests. :attr:`detail` renders them as the one line every
    report shows. ``name`` is the invariant's, given where its checker is registered
    (:data:`faultload.checker.compose.CHECKERS`), never by the checker itself.
    """

    name: str = ""
    ok: bool | None
    figure: float | int | None = None
    budget: float | int | None = None
    head: str = ""
    notes: tuple[str, ...] = ()
    cases: tuple[RuleCase, ...] = ()

    @property
    def detail(self) -> str:
        """The one line a report shows: the head, then each note."""
        text = " ".join("; ".join((self.head, *self.notes) if self.notes else (self.head,)).split())
        return text if len(text) <= DETAIL_MAX else text[: DETAIL_MAX - 1] + "…"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "figure": _json_number(self.figure),
            "budget": _json_number(self.budget),
            "detail": self.detail,
            "head": self.head,
            "notes": list(self.notes),
            "cases": [{"rule": c.rule, "rows": c.rows} for c in self.cases],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Verdict":
        """The inverse of :meth:`to_dict` (whose figures are JSON numbers: NaN/inf came back as None); a verdict
        stored before heads and notes were kept is its detail line as its head."""
        return cls(
            name=data["name"],
            ok=data["ok"],
            figure=data["figure"],
            budget=data["budget"],
            head=data.get("head", data["detail"]),
            notes=tuple(data.get("notes", ())),
            cases=tuple(RuleCase(c["rule"], c["rows"]) for c in data.get("cases", ())),
        )


@dataclass(frozen=True)
class CheckInputs:
    """Everything the checkers may read about one trial.

    ``faults`` None means no faults were scheduled. ``fatal_fault_kinds`` holds
    the fault kinds the shape declares fatal to the requests they hit (a
    request that gives up while one was in force is not a loss); an entry may be
    a bare kind (``"crash"``) or ``"link:kind"`` (``"router:crash"``).
    ``interrupted``: the user or the watchdog stopped the load early, so
    requests still pending are indeterminate (a load cut off at its wall
    bound is not interrupted: what is open then is judged by ``futures_resolve``). ``load_stopped_s``: trial seconds when the harness
    stopped the load (what the client met after it is the harness's doing, not
    the server's). ``trial_start_epoch`` maps the server log's
    wall-clock times to trial seconds (falls back to ``faults.trial_start_epoch``).
    """

    history: History
    monitor: MonitorSamples | None
    faults: FaultLog | None
    shape: LoadShape
    # What a correct server of the target's family may answer, and when (a bare url= target: SkyRL's); no
    # default: a family's rules are never assumed to be SkyRL's
    contract: ServerContract
    server_log: ServerLogSummary | None = None
    fatal_fault_kinds: frozenset[str] = frozenset()
    interrupted: bool = False
    load_stopped_s: float | None = None
    trial_start_epoch: float | None = None
    router_peak_in_flight: int | None = None  # the router's exact peak (its /stats), when known
    # the forwarding connections the server was configured to hold at most (ServerKnobs); None: no cap set
    forwarding_cap: int | None = None
    # nonce -> trial seconds the router completed it (its completion log), when known
    router_completed_s: Mapping[int, float] | None = None
    # nonce -> how many times the router completed it, for the nonces completed more than once; None when
    # unknown (a server someone else started, or a bundle written before the count was kept)
    router_repeats: Mapping[int, int] | None = None
    # error class key (ErrorClass.key) -> the client's first message of that class, when kept
    error_examples: Mapping[str, str] | None = None
    # The longest the router takes to answer a request it holds (its generation time and queue, or its
    # barrier's timeout), trial seconds; None when unknown. A request the router never answered is
    # released this long after its acceptance (futures_resolve).
    router_answer_bound_s: float | None = None
    # The least the router holds a forward before answering it (its generation time; 0 for the immediate
    # router), trial seconds; None when unknown or a barrier's (held until its wave fills)
    router_least_hold_s: float | None = None
    # the training clients' calls; None when the trial ran no training mix (its checkers are then not run)
    training: TrainingLog | None = None


Checker = Callable[[CheckInputs, Budgets], Verdict]


def _json_number(value: Any) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    number = float(value)
    return number if math.isfinite(number) else None
