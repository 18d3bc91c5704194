"""The forward: each accepted sample reaches the router once, unless its first forward could have failed.

The router's completion log counts how many times each prompt (its nonce)
was answered. A correct server forwards an accepted sample once and retries
only a forward that failed; a second completion of a prompt whose first
answer could not have been lost is work (the router's, the server's, a
GPU's in production) done twice for nothing, which no count or CPU budget
on a small trial sees.
"""

from __future__ import annotations

import numpy as np

from faultload.checker.common import overlaps
from faultload.checker.contract.faults import in_force_windows
from faultload.checker.contract.rules import Allowance, Rule
from faultload.checker.inputs import CheckInputs
from faultload.record.history import peak_overlap

FORWARDED_ONCE = Rule(
    "forwarded_once",
    "the router completes an accepted sample's prompt once",
    "a server that forwards a sample twice (a retry after a success, a duplicated task) doubles the "
    "backend's work for every request, and only an absolute CPU budget far above one trial's noise sees it",
)
RETRIED_FORWARD = Rule(
    "retried_forward",
    "a prompt may be completed again when its first answer could have been lost on the way back: a fault on "
    "the backend link, the router or the server process was in force (or within its grace) during the "
    "request, or the client submitted it more than once",
    "a server retries a forward whose answer it never got, and a resubmitted asample is a new future for "
    "the same prompt; the router cannot tell either from a duplicate",
)

FORWARDS_AT_ONCE = Rule(
    "forwards_at_once",
    "the server forwards every sample it has accepted and not yet had answered at once, up to the forwarding "
    "connections its configuration allows (none set: all of them)",
    "a ceiling of the server's own (a connector's default pool, a semaphore) queues samples inside the server, "
    "where no timer of the contract sees them: the router and the engine behind it are there to queue, and "
    "report it",
)
FORWARDS_BY_DESIGN = Rule(
    "forwards_by_design",
    "a server whose family's contract forwards at most forwards_at_once samples at a time owes the router no "
    "more at once than that",
    "a family may serve its queue with workers that take one job each (hatchery-core: one worker, one job at a "
    "time, one in flight per session): its ceiling is the design, stated in its contract, not a regression",
)
ROUTER_HOLDS_BRIEFLY = Rule(
    "router_holds_briefly",
    "how many forwards the server held at once is not judged when the router holds each for less than "
    "forwarding_min_hold_s (the immediate router: none)",
    "what the server then owes at once is its own queue to send the forwards, its CPU under the load, which "
    "no ceiling explains: the router answers each as it arrives (cost and latency are judged elsewhere)",
)
FORWARD_PATH_FAULT = Rule(
    "forward_path_fault",
    "how many forwards the server held at once is not judged in a trial with a fault on the forward's path "
    "(the backend link, the router, the server process)",
    "forwards then fail, are retried, hang or wait for a process that is paused: what the router held says "
    "nothing of a ceiling",
)

# Links whose faults can lose a forward's answer after the router completed it.
_FORWARD_LINKS = ("backend", "router", "server")


def repeated_forwards(inputs: CheckInputs, grace_s: float) -> tuple[Allowance, Allowance, np.ndarray]:
    """(FORWARDED_ONCE broken, RETRIED_FORWARD allowed, completions per row) over the history's rows.

    A row whose prompt the router completed more than once breaks the rule
    unless RETRIED_FORWARD allows it. ``router_repeats`` None (completions
    not counted) gives no rows: the caller says unknown.
    """
    history = inputs.history
    n = len(history)
    completions = np.ones(n, dtype=np.int64)
    if not inputs.router_repeats:
        return Allowance.none(FORWARDED_ONCE, n), Allowance.none(RETRIED_FORWARD, n), completions
    keys = np.fromiter(inputs.router_repeats.keys(), dtype=np.int64, count=len(inputs.router_repeats))
    counts = np.fromiter(inputs.router_repeats.values(), dtype=np.int64, count=len(keys))
    order = np.argsort(keys)
    keys, counts = keys[order], counts[order]
    at = np.minimum(np.searchsorted(keys, history["nonce"]), len(keys) - 1)
    found = keys[at] == history["nonce"]
    completions[found] = counts[at[found]]
    repeated = completions > 1
    windows = [w for w in in_force_windows(inputs, grace_s) if w[2].link in _FORWARD_LINKS]
    hit, labels = overlaps(history, windows, among=repeated)
    resubmitted = repeated & (history["submit_retries"] > 0)
    allowed = hit | resubmitted
    why = [*labels, *(["resubmitted"] if resubmitted.any() else [])]
    note = f"{int(allowed.sum())} completed again under {', '.join(why)}" if allowed.any() else ""
    return Allowance(FORWARDED_ONCE, repeated & ~allowed), Allowance(RETRIED_FORWARD, allowed, note), completions


def forward_path_faults(inputs: CheckInputs) -> list[str]:
    """The ``link:kind`` of each fault of the trial on the forward's path (FORWARD_PATH_FAULT), sorted."""
    return sorted(
        {f"{fault.link}:{fault.kind}" for _, _, fault in in_force_windows(inputs) if fault.link in _FORWARD_LINKS}
    )


def owed_forwards_peak(inputs: CheckInputs) -> int:
    """The most requests the server had accepted and the router had not yet completed, at any one time.

    Each accepted request is owed a forward from its submit's answer until the router completes it (never: until
    the end). A request the router completed before the client read its submit's answer owed nothing.
    """
    history, completed_s = inputs.history, inputs.router_completed_s or {}
    accepted = np.flatnonzero((history["server_id"] != 0) & np.isfinite(history["submit_end"]))
    starts = history["submit_end"][accepted].astype(np.float64)
    ends = np.array([completed_s.get(int(n), np.inf) for n in history["nonce"][accepted].tolist()], dtype=np.float64)
    owed = ends > starts
    return peak_overlap(starts[owed], ends[owed])
