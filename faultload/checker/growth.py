"""Does the shared server grow across a suite session: ``session_growth``.

A trial judges what one load did; a server that keeps a little of every
request (a store that never evicts, a sweeper task that died in an earlier
trial, a socket per request) may pass every trial and still grow without
bound. A suite session runs its trials on one shared server, so its RSS and
open fds at each trial's start, against the requests it has served by then,
say whether it grows with the work it does: the slope of a least-squares
line through those points, per 1,000 requests, against a budget. Points from
one server process only: a restarted server starts again from its own
baseline, so each process is a series of its own and the worst one counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from faultload.checker.budgets import MIB, Budgets
from faultload.checker.inputs import Verdict

NAME = "session_growth"
# The first point of a server process is dropped: its first trial loads what the server imports lazily and
# warms its pools, a step, not growth with the work.
WARM_UP_POINTS = 1


@dataclass(frozen=True)
class TrialStart:
    """The shared server as a trial found it: which process, the requests it had served, its RSS and fds."""

    server: int  # the server process (its pid): a restarted server is a series of its own
    requests: int  # sample requests the server had served before this trial (this process)
    rss: int  # bytes
    fds: int

    def to_dict(self) -> dict[str, int]:
        return {"server": self.server, "requests": self.requests, "rss": self.rss, "fds": self.fds}


def slope_per_k(requests: Sequence[float], values: Sequence[float]) -> float:
    """The least-squares slope of ``values`` against ``requests``, per 1,000 requests."""
    n = len(requests)
    mean_x, mean_y = sum(requests) / n, sum(values) / n
    sxx = sum((x - mean_x) ** 2 for x in requests)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(requests, values))
    return 1000.0 * sxy / sxx if sxx > 0 else 0.0


def _series(starts: Iterable[TrialStart]) -> list[list[TrialStart]]:
    by_server: dict[int, list[TrialStart]] = {}
    for start in starts:
        by_server.setdefault(start.server, []).append(start)
    return [points[WARM_UP_POINTS:] for points in by_server.values()]


def check_session_growth(starts: Sequence[TrialStart], budgets: Budgets) -> Verdict:
    """RSS (MiB) and fds per 1,000 requests served, from each trial's start, on the longest-serving process.

    Figure: the RSS slope in MiB per 1,000 requests; budget
    ``session_rss_mib_per_k_requests``; an fd slope over
    ``session_fds_per_k_requests`` is a violation too, named in the detail.
    Unknown when no server process served ``session_min_requests`` between
    the first and last trial starts it was measured at (after its first), or
    had fewer than three such points: a slope of two points is noise.
    """
    budget = budgets.session_rss_mib_per_k_requests
    judged = [points for points in _series(starts)
              if len(points) >= 3 and points[-1].requests - points[0].requests >= budgets.session_min_requests]
    if not judged:
        served = max((p[-1].requests - p[0].requests for p in _series(starts) if p), default=0)
        return Verdict(NAME, None, None, budget,
                       f"not enough to judge: {len(starts)} trial starts measured, at most {served} requests "
                       f"served between them on one server (session_min_requests {budgets.session_min_requests}, "
                       f"three trial starts after the first)")
    points = max(judged, key=lambda p: p[-1].requests - p[0].requests)
    requests = [float(p.requests) for p in points]
    rss = slope_per_k(requests, [p.rss / MIB for p in points])
    fds = slope_per_k(requests, [float(p.fds) for p in points])
    first, last = points[0], points[-1]
    head = (f"{rss:+.2f} MiB and {fds:+.2f} fds per 1,000 requests (budgets {budget:g} MiB, "
            f"{budgets.session_fds_per_k_requests:g} fds) over {len(points)} trial starts on server "
            f"{first.server}, {first.requests}-{last.requests} requests served: RSS "
            f"{first.rss / MIB:.0f}->{last.rss / MIB:.0f} MiB, fds {first.fds}->{last.fds}")
    over = [what for what, ok in (("RSS", rss <= budget), ("fds", fds <= budgets.session_fds_per_k_requests))
            if not ok]
    if over:
        return Verdict(NAME, False, rss, budget, f"the server grows with the requests it serves ({', '.join(over)}): "
                                                 f"{head}")
    return Verdict(NAME, True, rss, budget, head)
