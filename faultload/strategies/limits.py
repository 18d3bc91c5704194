"""How big the generated trials may get: one frozen value per suite profile.

The strategies never read settings behind the caller's back: every bound is a
field here, passed in. ``CI`` fits a whole ``pytest faultload`` run in ten
minutes on two cores at time scale 0.05; ``NIGHTLY`` goes bigger.

Times are in *SDK seconds* (the tinker SDK's and the server's own timers, before
the time scale) unless a name ends in ``_real_s``: the strategies multiply SDK
seconds by the trial's time scale, so a shape keeps the same meaning at 0.05 and
at 1.0.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from faultload.model.anchors import ANCHOR_EVENTS
from faultload.model.timescale import trial_s

HTTP_REQUESTS_PER_REQUEST = 2  # one asample POST and one retrieve_future poll, when all goes well


@dataclass(frozen=True)
class Limits:
    """Upper bounds of the generated trials (lower bounds are always the simplest case)."""

    max_requests: int = 256
    max_result_tokens: int = 1024
    max_num_samples: int = 4
    max_workers: int = 1
    accepts: tuple[str, ...] = ("proto", "json")
    # A request's result bytes held at the server at once, summed over the
    # outstanding cap (tokens x samples x 16 B, a JSON-sized token): keeps RSS
    # sane on a 24 GiB machine shared with others.
    max_in_flight_result_bytes: int = 64 << 20
    # Delayed first poll + abandoned-poll re-poll, SDK seconds. Kept under the
    # completed TTL (600 s) with room for generation: a client that polls
    # after the server was entitled to drop the result is not a server bug.
    max_poll_after_s: float = 450.0
    # True: late and abandoned polls may also come just inside and just outside each of the family's TTLs
    # (strategies.edges.around_edges), judged by the contract model (a poll past a TTL may find the result gone).
    draws_around_edges: bool = False
    # True: every trial drops a fraction of its first polls (abandoned polls
    # always drawn), re-polling after a timer landmark; False: sometimes.
    late_polls: bool = False
    # Retry storms: the client's poll timeout may drop (see client_policies).
    storms: bool = True
    # Router modes drawn, simplest first.
    router_modes: tuple[str, ...] = ("immediate", "latency", "barrier")
    # Router time a request waits for its result (queue + generation, or a
    # barrier timeout), SDK seconds. Above ~2 poll timeouts the SDK policy
    # itself re-polls more than the retry budget's one extra attempt.
    max_result_wait_s: float = 200.0
    # Router time for the whole load (an estimate, real seconds at the trial's scale).
    max_router_real_s: float = 30.0
    # Faults: at most this many per trial; their windows start within
    # fault_horizon_s and last at most max_fault_s (SDK seconds), outages
    # (down, timeout, reset_peer, limit_data) at most max_outage_s. CI keeps
    # outages at 60 SDK s: a property has 50 s for its trials, and one 720 SDK s
    # outage is 36 s of it at 0.05; NIGHTLY draws the full 1.2 x completed TTL.
    max_faults: int = 2
    fault_links: tuple[str, ...] = ("edge", "backend", "router")
    fault_horizon_s: float = 40.0
    max_fault_s: float = 60.0
    max_outage_s: float = 60.0
    router_crash: bool = True
    # Protocol events a fault may start at instead of a clock time (model.anchors); (): clock starts only.
    fault_anchors: tuple[str, ...] = tuple(ANCHOR_EVENTS)
    # Process faults: server:pause and router:pause (1 to PAUSE_MAX_S SDK s, SIGSTOP/SIGCONT) and
    # server:restart. Off in CI: a restart costs a real server start-up (seconds that do not scale).
    process_faults: bool = False
    # Share of trials run by the real tinker SDK client (client="sdk") among
    # those whose shape it can run: one burst, no late or abandoned polls, the
    # SDK's own policy, proto results (see load_shapes). 0: never.
    sdk_fraction: float = 0.25
    # Arrival patterns the shapes may use (the first is the simplest).
    arrivals: tuple[str, ...] = ("burst", "waves", "ramp", "poisson")
    max_arrival_span_s: float = 100.0
    # Training beside the samples (faultload.strategies.shapes.training_mixes): at most this many
    # trainers, at least min_trainers (the training property's 1). 0: no training is drawn, and the
    # shared stack runs the sleeper engine; above 0 every trial of the session gets the null engine
    # (one stack for all), trained or not.
    max_trainers: int = 0
    min_trainers: int = 0
    # The trial's own wall bound (real seconds) and post-load drain wait.
    max_wall_real_s: float = 120.0
    drain_real_s: float = 10.0
    # The time scale shrinks timers, not the server's work. The work queued
    # by the requests held at once (HTTP_REQUESTS_PER_REQUEST each at
    # server_s_per_request, plus server_s_per_result_kib per KiB of result:
    # the answer time clean 0.4.0 gives here, ~1.5x its 1.6-2.0 ms of CPU per
    # HTTP request with the load on the same 2 cores, and ~0.01 ms per KiB)
    # must fit in
    # max_backlog_share of the client's poll timeout at the trial's scale;
    # past that a trial's poll timeouts, re-polls, expired results and slow
    # /healthz are the scale's doing, not the server's (max_faithful_held).
    server_s_per_request: float = 2.8e-3
    server_s_per_result_kib: float = 1.0e-5
    max_backlog_share: float = 0.25

    def max_faithful_held(self, poll_timeout_s: float, time_scale: float, result_kib: float = 0.0) -> int:
        """Most requests a shape may hold at once so that the server's queued work fits the scaled poll timeout.

        At time scale 0.05 with the SDK's 45 s poll timeout and small
        results: 100 (a storm's 15 s: 33; 360 KiB results: 61). Measured on
        0.4.0 at 0.05 (immediate router, 2,813 requests, 2 cores shared with
        the load; `faultload run --max-outstanding N`):

        * 200 held: 77-125 poll timeouts at 2.25 s and /healthz p99 3.4-5.4 s
          in every run (plain, and with either fix); at time scale 1 the
          same trial has none and p99 0.53 s, at 0.2 eight and 0.64 s;
        * 140 held: 32-48 timeouts, p99 0.76-2.17 s; 100 held: none, p99
          0.35 s; 70 held: none, p99 0.25-0.38 s; the load took 9-12 s at
          every cap, so holding fewer costs this shape nothing.

        The earlier calibration (1.4 ms per HTTP request, 200 held):

        * 2,000 held: 3.7-4.0 HTTP attempts per request (thousands of poll
          timeouts at 2.25 s while the server worked through its queue);
          3,717 held with a 15 s storm timeout: 16-45 results lost to 404s
          after re-poll cascades, on a healthy network;
        * 401 held (the limit at a share of 0.5): /healthz p99 2.55 s with
          1-token results and 4.15 s with 360 KiB results, against a 2.5 s
          budget; the queue took 2-3x the CPU estimate, the server sharing
          the 2 cores with the load;
        * 400 held, 6,000 requests, one worker: 2.0 attempts, p99 0.24 s.

        At full time the same work is queued against 45 s, and none of that
        happens; holding thousands at once is the confirmation run's job.
        """
        budget_s = trial_s(self.max_backlog_share * poll_timeout_s, time_scale)
        per_request_s = (
            HTTP_REQUESTS_PER_REQUEST * self.server_s_per_request + result_kib * self.server_s_per_result_kib
        )
        return max(1, int(budget_s // per_request_s))

    def replace(self, **changes) -> "Limits":
        return dataclasses.replace(self, **changes)


CI = Limits()
NIGHTLY = Limits(
    max_requests=8192,
    max_result_tokens=16384,
    max_num_samples=8,
    max_workers=4,
    max_in_flight_result_bytes=1 << 30,
    max_router_real_s=120.0,
    max_faults=4,
    fault_horizon_s=120.0,
    max_fault_s=120.0,
    max_outage_s=720.0,  # SkyRL's longest outage (strategies.faults.outage_durations): 36 s at 0.05, in the wall
    process_faults=True,
    max_arrival_span_s=300.0,
    max_wall_real_s=600.0,
    max_trainers=32,
    # Draws around the TTLs: SkyRL's 660 s (1.1 x its completed TTL) must fit, past the 450 s that keeps draws
    # inside every TTL; 720 SDK s is 36 s at time scale 0.05.
    draws_around_edges=True,
    max_poll_after_s=720.0,
)
