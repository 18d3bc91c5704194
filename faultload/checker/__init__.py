"""Was it right: the trial's invariants as pure functions of what was recorded.

Each checker is ``check_x(inputs: CheckInputs, budgets: Budgets) -> Verdict``;
it reads only its arguments (no clock, no network, no globals), so a stored
trial is judged again with the same answer (a trial bundle: ``faultload
check``). A verdict is ``ok=True`` (holds), ``False`` (violated) or ``None``
(unknown: not enough data, or the checker crashed —
:func:`~faultload.checker.compose.check_all` turns an exception into ``None``,
never into ``True``).

A verdict is data, built by keyword: its ``head`` names the requests (nonce,
server id) and times (seconds since the trial's start) a reader needs to go
and look, each of its ``notes`` what was explained or left unjudged, and its
``cases`` which rules of the contract covered how many requests; its
``detail`` property renders them as the one line every report shows. A
checker does not name its verdict: the name is where it is registered
(``CHECKERS``), and ``check_all`` gives it.

Each verdict's ``figure`` is the invariant's one steering figure (the suite's
Hypothesis ``target()`` reads only these), always the same quantity whatever
the branch: a count of bad requests, fds per request in flight, RSS growth in
MiB, the /healthz p99, CPU ms per request, mean attempts per request. When a
second condition of the same invariant fails (fds not back after the drain,
too many failed probes, one request over the attempt max), ``ok`` is False and
the detail names it; the figure stays what it always means.

Rooms: ``inputs`` (:class:`CheckInputs`, :class:`Verdict`), ``common`` (fault
windows, request spans, detail text), one module per group of invariants
(``results``, ``resources``, ``health``, ``retries``, ``serverlog``),
``compose`` (``CHECKERS``, ``check_all``, ``overall``, ``to_report``),
``budgets`` and ``judge`` (a ``TrialResult`` onto ``CheckInputs``).

Only the budgets are re-exported here: they import nothing heavy, and the CLI
imports them at its top, which every spawned load worker imports again; the
checkers need numpy and the history, so import them from their modules.
"""

from faultload.checker.budgets import Budgets, load_budgets

__all__ = ["Budgets", "load_budgets"]
