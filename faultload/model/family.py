"""A Tinker-API server family's futures contract, as plain values: what a correct server of it may answer,
and when (SDK seconds, before a trial's time scale).

The family's code (install, launch, patch points) is ``faultload/targets/families/<family>.py`` behind
``faultload.targets.family.ServerFamily``; what the checker judges against is here, so that a stored trial is
judged without loading any of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from faultload.model.switches import HATCHERY_FIXES, REGRESSIONS, SKYRL_FIXES, TUFT_FIXES, TWINKLE_FIXES


@dataclass(frozen=True)
class ServerContract:
    poll_hold_s: float  # retrieve_future holds a poll for a result not ready this long...
    hold_expiry: str  # ...then answers this: "408" (SkyRL) or "try_again" (a 200 telling the client to poll again)
    retrieved_ttl_s: float | None  # a delivered result is kept this long (None: until the server stops)
    completed_ttl_s: float | None  # a completed, never-retrieved result is kept this long
    session_timeout_s: float | None  # a session not heartbeated this long is expired
    # Not a promise but the family's cost: the server CPU per HTTP request its clean release stays under with
    # margin on a slow machine (bounded_cpu's default budget; how each was measured is its reason in
    # checker/budget_docs.py, the numbers behind it docs/results/measurements.md).
    cpu_ms_per_request: float
    # How often expired results are evicted: a result may outlive its TTL by this much (None: never evicted)
    sweep_s: float | None = None
    # A future is forgotten this long after the server created it, done, delivered or not (None: no such limit)
    created_ttl_s: float | None = None
    # The server forgets its oldest futures past this many (None: no cap)
    max_futures: int | None = None
    # Samples the server forwards at once by design, whatever its forwarding connections allow (None: every one)
    forwards_at_once: int | None = None
    # The server forgets expired futures only at every this-many-th registration, not on a timer (None: a timer)
    sweep_registrations: int | None = None
    # Late-poll delays (SDK s) the draws prefer for this family beside the SDK's own timers: where its TTLs, and
    # a shorter one a regression could bring, run out (strategies.shapes.poll_landmarks)
    poll_landmarks_s: tuple[float, ...] = ()
    # The server is a process tree whose scheduler starts and ends worker processes by itself (Ray's pool):
    # its drained fds and RSS are the pool's, not the requests' (checker.contract.processes)
    worker_pool: bool = False
    # Not a promise but the family's start-up: a restarted server serves again within this many real seconds on
    # a slow machine (measured, with margin); a trial's requests meant for the new process come after it
    restart_s: float = 15.0

    @property
    def longest_ttl_s(self) -> float | None:
        """The longest any result is kept by design (a fix may keep a delivered one its completed TTL; a future
        is forgotten its created TTL after creation whatever else); None: for as long as the server runs."""
        if self.created_ttl_s is not None:
            return self.created_ttl_s
        ttls = [ttl for ttl in (self.retrieved_ttl_s, self.completed_ttl_s) if ttl is not None]
        return max(ttls) if ttls else None

    @property
    def earliest_loss_s(self) -> float | None:
        """The shortest time after its creation a result may be gone by design (None: never)."""
        ttls = [ttl for ttl in (self.retrieved_ttl_s, self.completed_ttl_s, self.created_ttl_s) if ttl is not None]
        return min(ttls) if ttls else None


# SkyRL's skyrl.tinker.api: RETRIEVE_FUTURE_TIMEOUT_SECONDS, the in-memory store's TTLs (the retrieved one was
# 120 s before the fix `--regress retention` undoes) and its sweep interval, EngineConfig.session_timeout_sec.
SKYRL_CONTRACT = ServerContract(
    poll_hold_s=300.0,
    hold_expiry="408",
    retrieved_ttl_s=300.0,
    completed_ttl_s=600.0,
    session_timeout_s=300.0,
    cpu_ms_per_request=3.0,
    sweep_s=30.0,
    # past the pre-fix retrieved TTL (120 s) and its sweep; past the retrieved TTL (300 s), the SDK's backoff
    # cap twice (30 s each) and 40 s more
    poll_landmarks_s=(200.0, 400.0),
)

# TuFT's tuft.server: FutureStore.retrieve holds a poll 120 s (its keyword default), then answers the SDK's
# TryAgainResponse with a 200; its in-memory futures are never evicted (FutureStore.cleanup is never called) and
# its sessions never expire, so a result is due for as long as the server runs.
TUFT_CONTRACT = ServerContract(
    poll_hold_s=120.0,
    hold_expiry="try_again",
    retrieved_ttl_s=None,
    completed_ttl_s=None,
    session_timeout_s=None,
    cpu_ms_per_request=5.5,
)

# hatchery-core's hatchery.core.tinker_compat: retrieve_future holds a poll Config.max_job_timeout_seconds (600 s),
# then answers a 200 try-again; its future registry forgets an entry _REGISTRY_MAX_AGE_S (3600 s) after creating
# it, done or not, and its oldest past _REGISTRY_MAX_ENTRIES (100,000), both at every 1000th registration; the
# job queue keeps every result and sessions never expire. Its local worker (StubWorker, the GPU worker's stand-in)
# takes one job at a time from the queue.
HATCHERY_CONTRACT = ServerContract(
    poll_hold_s=600.0,
    hold_expiry="try_again",
    retrieved_ttl_s=None,
    completed_ttl_s=None,
    session_timeout_s=None,
    cpu_ms_per_request=3.0,  # 1.0-2.0x SkyRL's per request, one after the other; how: checker/budget_docs.py
    created_ttl_s=3600.0,
    max_futures=100_000,
    forwards_at_once=1,
    sweep_registrations=1000,
)

# twinkle-kit's twinkle.server: its gateway's retrieve_future holds a poll TWINKLE_LONG_POLL_TIMEOUT (30 s), then
# answers a 200 try-again; ServerState forgets a future, a session not heartbeated, and a sampling session
# expiration_timeout (86,400 s) after its last write (a result's: its completion; delivery writes nothing), at
# every cleanup_interval (3,600 s). Its sampler replica calls the sampler synchronously: one sample at a time.
TWINKLE_CONTRACT = ServerContract(
    poll_hold_s=30.0,
    hold_expiry="try_again",
    retrieved_ttl_s=86400.0,  # from completion, which comes before any delivery: never longer from delivery
    completed_ttl_s=86400.0,
    session_timeout_s=86400.0,
    cpu_ms_per_request=70.0,  # ~48x SkyRL's per request, most of it Ray's; how: checker/budget_docs.py
    sweep_s=3600.0,
    forwards_at_once=1,
    worker_pool=True,
    restart_s=45.0,  # a server:restart took 28.9 s to serve again (Ray, Serve, the sampler's warm-up sample)
)


@dataclass(frozen=True)
class FamilyTraits:
    """What a trial may ask of a family's launched server, beside its contract."""

    contract: ServerContract
    regressions: tuple[str, ...]  # the --regress switches (model.switches) its launcher applies
    fixes: tuple[str, ...]  # the --fix switches its launcher applies
    engines: tuple[str, ...]  # the engines (model.trial.ENGINES) its launcher can run under it
    knobs: tuple[str, ...]  # the ServerKnobs its launcher passes to the server
    # The first release whose results the real SDK (tinker 0.25, proto only) can read; None: every release.
    sdk_reads_since: tuple[int, int] | None = None
    # False: no release's results are readable by the real SDK (it answers a sample's result as JSON only)
    sdk_reads_results: bool = True


# The families faultload can install and launch, by the name a target spec starts with (skyrl==X.Y.Z).
TRAITS = {
    # 0.3.0 answers a result as JSON only
    "skyrl": FamilyTraits(
        SKYRL_CONTRACT,
        REGRESSIONS,
        SKYRL_FIXES,
        engines=("sleeper", "null"),
        knobs=("forwarding_max_connections", "forwarding_timeout_s", "retrieved_ttl_s"),
        sdk_reads_since=(0, 4),
    ),
    # A TuFT launch serves sampling only (no training capability, no torch): no engine to swap, no store TTL.
    "tuft": FamilyTraits(
        TUFT_CONTRACT,
        (),
        TUFT_FIXES,
        engines=("sleeper",),
        knobs=("forwarding_max_connections", "forwarding_timeout_s"),
    ),
    # hatchery-core's local server with its scripted worker: sampling only, no torch.
    # Its results are JSON only: no tinker release reads them (finding 12).
    "hatchery": FamilyTraits(
        HATCHERY_CONTRACT,
        (),
        HATCHERY_FIXES,
        engines=("sleeper",),
        knobs=("forwarding_timeout_s",),
        sdk_reads_results=False,
    ),
    # twinkle-kit's gateway and mock sampler on a Ray node of their own: sampling only, no regressions.
    "twinkle": FamilyTraits(
        TWINKLE_CONTRACT,
        (),
        TWINKLE_FIXES,
        engines=("sleeper",),
        knobs=("forwarding_timeout_s",),
        # no tinker release since 0.25 opens a client on it: it has no /api/v1/client/config (finding 17)
        sdk_reads_results=False,
    ),
}
CONTRACTS = {name: traits.contract for name, traits in TRAITS.items()}
FAMILY_NAMES = tuple(TRAITS)
