"""Does the shared server grow across a suite session: ``session_growth``.

A trial judges what one load did; a server that keeps a little of every
request (a store that never evicts, a sweeper task that died in an earlier
trial, a socket per request) may pass every trial and still grow without
bound. A suite session runs its trials on one shared server, so its RSS and
open fds at each trial's start, against the requests it has served by then,
say whether it grows with the work it does: the slope of a least-squares
line through those after its high-water marks, per 1,000 requests, against
a budget. Points from one server process only: a restarted server starts
again from its own baseline, so each process is a series of its own and the
worst one counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from faultload.checker.budgets import MIB, Budgets
from faultload.checker.inputs import Verdict

NAME = "session_growth"
# Only the trial starts after a server process's high-water marks are judged: a Python server keeps the heap its
# largest load needed. They come after the first half of the requests it served (on the ci fixed row, a trial
# holding 2,048 requests at once left +204 MiB that stayed, flat, for the 3,000 requests after it: a least-squares
# line over the whole session read that step as +32.8 MiB per 1,000) and after its largest trial, in requests and
# in result tokens asked: a lane's server meets its property's largest loads wherever its draws put them (on a
# lane of the ci fixed row, trials of 216 requests x 868 x 3 tokens at requests 2,664-3,708 of 4,386 raised the
# RSS 586 -> 604 MiB, then 597-599 flat: +7.49 MiB per 1,000 over the later half). A store that keeps what it
# serves grows after its largest load too.
JUDGED_SHARE = 0.5


@dataclass(frozen=True)
class TrialStart:
    """The shared server as a trial found it: which process, the requests it had served, its RSS and fds."""

    server: int  # the server process (its pid): a restarted server is a series of its own
    requests: int  # sample requests the server had served before this trial (this process)
    rss: int  # bytes
    fds: int
    asked_requests: int = 0  # the requests of the trial that starts here
    asked_tokens: int = 0  # the result tokens it asks for (requests x tokens x samples)

    def to_dict(self) -> dict[str, int]:
        return {
            "server": self.server,
            "requests": self.requests,
            "rss": self.rss,
            "fds": self.fds,
            "asked_requests": self.asked_requests,
            "asked_tokens": self.asked_tokens,
        }


def slope_per_k(requests: Sequence[float], values: Sequence[float]) -> float:
    """The least-squares slope of ``values`` against ``requests``, per 1,000 requests."""
    n = len(requests)
    mean_x, mean_y = sum(requests) / n, sum(values) / n
    sxx = sum((x - mean_x) ** 2 for x in requests)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(requests, values))
    return 1000.0 * sxy / sxx if sxx > 0 else 0.0


def _after_high_water(points: list[TrialStart]) -> list[TrialStart]:
    """The starts after the first of the largest trials, in requests and in tokens, and in the later half of the
    requests served (``JUDGED_SHARE``)."""
    largest = max(
        max(range(len(points)), key=lambda i: (getattr(points[i], axis), -i))
        for axis in ("asked_requests", "asked_tokens")
    )
    later = (1 - JUDGED_SHARE) * points[-1].requests
    return [p for p in points[largest + 1 :] if p.requests >= later]


def _series(starts: Iterable[TrialStart]) -> list[list[TrialStart]]:
    """Each server process's trial starts after its high-water marks."""
    by_server: dict[int, list[TrialStart]] = {}
    for start in starts:
        by_server.setdefault(start.server, []).append(start)
    return [_after_high_water(points) for points in by_server.values()]


def check_session_growth(starts: Sequence[TrialStart], budgets: Budgets) -> Verdict:
    """RSS (MiB) and fds per 1,000 requests served, from each trial's start, on the longest-serving process.

    Figure: the RSS slope in MiB per 1,000 requests; budget
    ``session_rss_mib_per_k_requests``; an fd slope over
    ``session_fds_per_k_requests`` is a violation too, named in the detail.
    Unknown when no server process served ``session_min_requests`` between
    the first and last trial starts after its high-water marks (the later
    half of its requests, after its largest trials), or had fewer than three
    such points: a slope of two points is noise.
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
            f"served between them on one server after its high-water marks (session_min_requests "
            f"{budgets.session_min_requests}, three trial starts after its largest trials, in the later half of "
            f"its requests)",
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
