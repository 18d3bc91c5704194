"""Does the shared server grow across a suite session: ``session_growth``.

A trial judges what one load did; a server that keeps a little of every
request (a store that never evicts, a sweeper task that died in an earlier
trial, a socket per request) may pass every trial and still grow without
bound. A suite session runs its trials on one shared server, so its RSS and
open fds at each trial's start, against the requests it has served by then,
say whether it grows with the work it does: the slope of a least-squares
line through those of the later half of its requests (the first half holds
its high-water marks), per 1,000 requests, against a budget. Points from
one server process only: a restarted server starts again from its own
baseline, so each process is a series of its own and the worst one counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from faultload.checker.budgets import MIB, Budgets
from faultload.checker.inputs import Verdict

NAME = "session_growth"
# Only the trial starts in the later half of a server process's requests are judged: the first half is where it
# meets the session's largest loads and reaches its high-water marks, which a Python server keeps (on the ci
# fixed row, a trial holding 2,048 requests at once left +204 MiB that stayed, flat, for the 3,000 requests
# after it: a least-squares line over the whole session read that step as +32.8 MiB per 1,000). A store that
# keeps what it serves grows through the later half too.
JUDGED_SHARE = 0.5


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
    """Each server process's trial starts in the later half of the requests it served (``JUDGED_SHARE``)."""
    by_server: dict[int, list[TrialStart]] = {}
    for start in starts:
        by_server.setdefault(start.server, []).append(start)
    return [
        [p for p in points if p.requests >= (1 - JUDGED_SHARE) * points[-1].requests] for points in by_server.values()
    ]


def check_session_growth(starts: Sequence[TrialStart], budgets: Budgets) -> Verdict:
    """RSS (MiB) and fds per 1,000 requests served, from each trial's start, on the longest-serving process.

    Figure: the RSS slope in MiB per 1,000 requests; budget
    ``session_rss_mib_per_k_requests``; an fd slope over
    ``session_fds_per_k_requests`` is a violation too, named in the detail.
    Unknown when no server process served ``session_min_requests`` between
    the first and last trial starts of the later half of its requests, or had
    fewer than three such points: a slope of two points is noise.
    """
    budget = budgets.session_rss_mib_per_k_requests
    judged = [
        points
        for points in _series(starts)
        if len(points) >= 3 and points[-1].requests - points[0].requests >= budgets.session_min_requests
    ]
    if not judged:
        served = max((p[-1].requests - p[0].requests for p in _series(starts) if p), default=0)
        return Verdict(
            name=NAME,
            ok=None,
            figure=None,
            budget=budget,
            head=f"not enough to judge: {len(starts)} trial starts measured, at most {served} requests "
            f"served between them on one server (session_min_requests {budgets.session_min_requests}, "
            f"three trial starts in the later half of its requests)",
        )
    points = max(judged, key=lambda p: p[-1].requests - p[0].requests)
    requests = [float(p.requests) for p in points]
    rss = slope_per_k(requests, [p.rss / MIB for p in points])
    fds = slope_per_k(requests, [float(p.fds) for p in points])
    first, last = points[0], points[-1]
    head = (
        f"{rss:+.2f} MiB and {fds:+.2f} fds per 1,000 requests (budgets {budget:g} MiB, "
        f"{budgets.session_fds_per_k_requests:g} fds) over {len(points)} trial starts on server "
        f"{first.server}, {first.requests}-{last.requests} requests served: RSS "
        f"{first.rss / MIB:.0f}->{last.rss / MIB:.0f} MiB, fds {first.fds}->{last.fds}"
    )
    over = [what for what, ok in (("RSS", rss <= budget), ("fds", fds <= budgets.session_fds_per_k_requests)) if not ok]
    if over:
        return Verdict(
            name=NAME,
            ok=False,
            figure=rss,
            budget=budget,
            head=f"the server grows with the requests it serves ({', '.join(over)}): {head}",
        )
    return Verdict(name=NAME, ok=True, figure=rss, budget=budget, head=head)
