"""The detection matrix's rows: each a build and the result the suite must give it (``faultload matrix``).

Data only, beside the code that runs them (``faultload.matrix.run``), which re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from faultload.compare.rows import COMPARE_TRIAL, LONG_RESULT_TRIAL, STORE_TRIAL
from faultload.model.build import Build


@dataclass(frozen=True)
class Expectation:
    """What a row must come out as on a profile, and which invariants must be the ones that catch it."""

    expected: str  # "clean" | "caught"
    caught_by: tuple[str, ...] = ()  # when caught: at least one of these must be among the violated
    why: str = ""  # why this expectation (on a profile override: what differs there)


@dataclass(frozen=True)
class MatrixRow:
    """One (target, regression and fix switches) with the result the suite must give."""

    name: str
    target: str
    regress: tuple[str, ...]
    expected: str  # "clean" | "caught" (every profile, unless ``on`` says otherwise)
    why: str  # what the row proves (the upstream fix a regression switch undoes, the bug a fix mends)
    fixes: tuple[str, ...] = ()
    caught_by: tuple[str, ...] = ()  # the invariants that name the bug; () for an expected-clean row
    on: tuple[tuple[str, Expectation], ...] = ()  # (profile, expectation) overrides
    # a comparison row: `faultload compare` against this build (caught_by: compare metrics), not a suite session
    baseline: str | None = None
    # a comparison row's trial (the same on every profile): a cost that grows with the result's size is
    # compared at a size where it shows; the default is the reference harness's 4,096 barrier burst
    compare_trial: tuple[str, ...] = COMPARE_TRIAL
    # run only the suite's properties this pytest -k expression selects (None: every property)
    only: str | None = None
    # the SDK release the session's real-SDK trials run (--faultload-sdk); None: the one beside faultload
    sdk: str | None = None

    @property
    def build(self) -> str:
        """The row's own build spec (target + switches), as ``faultload compare`` takes it."""
        return Build(self.target, tuple(sorted(self.regress)), tuple(sorted(self.fixes))).text

    def expectation(self, profile: str) -> Expectation:
        for name, expectation in self.on:
            if name == profile:
                return expectation
        return Expectation(self.expected, self.caught_by, self.why)


# Finding 1 (README): a failed forward makes SkyRL 0.4.0 write a Rich traceback on its
# event loop; ~200 at once stall it for tens of seconds. /healthz then fails
# (healthz_latency), the watchdog calls event_loop_stall (no_collapse), and clients
# re-poll the frozen server (retry_amplification: 3.77 attempts per request on a nightly run).
FINDING_1_INVARIANTS = ("healthz_latency", "no_collapse", "retry_amplification")
# Finding 5: a result written into a half-open edge is swept after the retrieved TTL, and the client's re-poll
# after the edge heals gets 404. The nightly profile's known trial half_open_delivery makes it every run.
FINDING_5_INVARIANTS = ("no_lost_results",)

# Finding 6: tinker >= 0.26 asserts that asample's answer carries one sequence id per sample; 0.4.0 sends none,
# so every sample through such an SDK fails once its result has arrived (the SDK's AssertionError: corrupt).
FINDING_6_INVARIANTS = ("result_integrity",)
NEWEST_SDK = "tinker==0.38.0"
# Finding 7: TuFT 0.2.2 validates asample's body with tinker 0.25's closed SampleRequest, so the fields tinker >= 0.26
# adds are a 422 for every sample (and its answer carries no sequence ids, which that SDK asserts).
FINDING_7_INVARIANTS = ("accepted_requests",)
TUFT_TARGET = "tuft==0.2.2"
# Finding 8: with persistence off (TuFT's default) a restart forgets every session, and a sample submitted on a
# forgotten one is accepted (202), then failed: a 404, and an error line. The nightly profile's restart known trial
# makes it first; ci draws no restart.
FINDING_8_INVARIANTS = ("no_lost_results", "clean_server_log")
_FINDING_8_ON_NIGHTLY = (("nightly", Expectation(
    "caught", FINDING_8_INVARIANTS, "nightly's restart known trial meets finding 8 (a restart forgets every session)")),)
FIXES_OF_FINDINGS = ("plain-tracebacks", "keepalive-past-sdk", "retain-until-expiry")

# A store that keeps what it no longer owes: releases_results (the known trial release_hold's hold past the
# TTLs), or the shared server's growth across the session.
KEEP_INVARIANTS = ("releases_results", "session_growth")

# ci draws no process fault (a restart costs a real server start-up): a bug only a restart shows is nightly's.
_NO_RESTART_ON_CI = (("ci", Expectation("clean", (), "ci draws no server:restart, the only way this bug shows")),)


def _mutant(switch: str, why: str, caught_by: tuple[str, ...], row: str | None = None, **kwargs) -> MatrixRow:
    """A row for one bug-class regression (targets/skyrl_mutants.py), named after its switch unless ``row``."""
    return MatrixRow(row or switch, "skyrl==0.4.0", (switch,), "caught", why, caught_by=caught_by, **kwargs)


# The bug classes a pull request could introduce (README, "Time scale and regressions"), each with the
# invariants that must be the ones to catch it.
MUTANT_ROWS: tuple[MatrixRow, ...] = (
    _mutant("never-resolve-on-failure", "a failed forward never completes its future: the client polls forever "
            "(the watchdog's no_progress stops such a trial, leaving its requests indeterminate)",
            ("futures_resolve", "no_collapse")),
    _mutant("early-408", "the long poll answers 408 after 1 SDK s instead of 300: every client re-polls",
            ("polls_held", "retry_amplification"), only="test_bounded_retries"),
    _mutant("id-reuse-after-restart", "ids start at -1 in every server process: a pre-restart id polled after "
            "a restart gets another request's result", ("result_integrity",), on=_NO_RESTART_ON_CI),
    _mutant("500-for-unknown", "an unknown (pre-restart or expired) id answers 500, which the client retries "
            "forever, not 404 (each 500's traceback stalls the loop, which extends the resolve bound)",
            ("futures_resolve", "clean_server_log", "no_collapse"), on=_NO_RESTART_ON_CI),
    _mutant("blocking-call", "a 10 ms blocking call on the event loop per asample",
            ("healthz_latency", "no_collapse", "retry_amplification")),
    _mutant("mixed-results", "the request id kept on the shared forwarding client across the forward's await: "
            "results stored under another request's id", ("result_integrity", "futures_resolve")),
    _mutant("pending-ttl-short", "a 60 s pending TTL (an hour written in minutes): forwards pending over a "
            "minute swept, their results dropped", ("no_lost_results", "clean_server_log")),
    _mutant("swapped-ttls", "the store's TTLs under each other's keyword: an undelivered result kept 300 s, "
            "not 600", ("no_lost_results",)),
    _mutant("truncated-result", "every sequence's last token dropped", ("result_integrity",)),
    _mutant("empty-200-on-failure", "a failed forward answered 200 with zero sequences instead of an error",
            ("result_integrity",)),
    # measured on ci: the sessions' creation and leaked connectors stall the loop before any close is logged
    _mutant("session-per-request", "a new aiohttp session per forward, never closed",
            ("clean_server_log", "healthz_latency", "no_collapse")),
    # a CPU comparison with the release at the 4,096 burst did not separate it (ratio 1.19, interval 0.98-1.47);
    # the router's completion log counts every prompt it answered
    _mutant("double-forward", "every sample forwarded to the router twice: each prompt completed twice with no "
            "fault that could lose the first answer", ("forwarded_once",)),
    # One extra poll per request stays inside retry_amplification's budget (3) and futures_resolve's bound;
    # the contract's polls_woken sees the poll held past its result (a trial at 0.05: 64 of 128 polls).
    _mutant("lost-wakeup", "a completed result wakes no held poll, delivered only by the client's next poll",
            ("polls_held",)),
    # The contract's time edges (targets/skyrl_mutants_time.py), met by the edge trials (strategies/edges.py)
    # every session: a random draw places a client just inside a TTL only by chance.
    _mutant("completed-ttl-from-creation", "a completed result's TTL measured from its creation: a result whose "
            "generation took long is swept that much sooner after it completes (completed_ttl_edge)",
            ("no_lost_results",), only="test_no_lost_results"),
    _mutant("retrieved-ttl-from-completion", "a delivered result's grace measured from its completion: a result "
            "delivered late in its life is swept at once after the delivery (retrieved_ttl_edge)",
            ("no_lost_results",), only="test_no_lost_results"),
    _mutant("retrieved-ttl-short", "the retry grace cut from 300 s to 120 s, under the SDK's 150 s worst-case "
            "re-poll gap, the is_disconnected guard kept (retrieved_ttl_edge)", ("no_lost_results",),
            only="test_no_lost_results"),
    # Limits that bite only past a thousand in flight (targets/skyrl_mutants_size.py), met by size_burst.
    _mutant("store-capped", "at most 1,000 futures kept, the oldest dropped: past a thousand in flight, pending "
            "futures are evicted before their results arrive (size_burst)", ("no_lost_results", "clean_server_log"),
            only="test_bounded_resources"),
    _mutant("results-capped", "the sweep keeps at most 10,000 finished results, the oldest dropped: results owed "
            "past that count are evicted before their polls (size_flood, nightly's 16,384 owed at once)",
            ("no_lost_results",), only="test_all_invariants", on=(("ci", Expectation(
                "clean", (), "ci's largest trial owes 2,048 results at once (size_burst), under the cap; the 16,384 "
                "of size_flood take a full-time trial of minutes, nightly's")),)),
    _mutant("forwarding-pool-default", "the forwarding connector built without its limit: aiohttp's default 100 "
            "connections where the configuration says none (size_burst)", ("forwards_concurrent",),
            only="test_bounded_resources"),
    _mutant("forwarding-semaphore", "at most 256 forwards at once (vLLM's max_num_seqs), the rest queued inside "
            "the server (size_burst)", ("forwards_concurrent",), only="test_bounded_resources"),
    # What the store keeps (targets/skyrl_mutants_keep.py): every request is answered right, so only the known
    # trial release_hold (bounded_resources, ci) sees the results kept past their TTL, or the session's growth.
    *(_mutant(switch, why, KEEP_INVARIANTS, only="test_bounded_resources") for switch, why in (
        ("keep-delivered", "the sweep never evicts a delivered result: the store grows with every request"),
        ("evict-pending-only", "the sweep evicts abandoned pending forwards only: completed results stay"),
        ("naive-completed-at", "completed_at stored without a timezone: the first sweep meeting a completed, "
                               "undelivered result raises TypeError and the sweeper task dies silently"),
        ("sweep-counts-bytes", "each sweep sums its results' proto lengths: a failed forward's entry (no proto) "
                               "raises TypeError and the sweeper task dies silently"),
    )),
)

DEFAULT_ROWS: tuple[MatrixRow, ...] = (
    MatrixRow("clean", "skyrl==0.4.0", (), "caught",
              "SkyRL 0.4.0 has finding 1 (the Rich-traceback stall): a backend fault that fails a few dozen forwards "
              "at once meets it, and ci's derandomized draws hold one (backend:timeout over 33 forwards: 3.62 "
              "attempts per request, /healthz 10 s; with --fix plain-tracebacks 2.00); the fixed row is the "
              "no-false-alarm row", caught_by=FINDING_1_INVARIANTS,
              on=(("nightly", Expectation(
                  "caught", FINDING_1_INVARIANTS + FINDING_5_INVARIANTS,
                  "SkyRL 0.4.0 has finding 1 (the Rich-traceback stall): nightly's backend faults meet it; and "
                  "finding 5 (a result written into a half-open edge swept before its client is back): nightly's "
                  "known trial half_open_delivery meets it; the fixed row is the no-false-alarm row")),)),
    MatrixRow("fixed", "skyrl==0.4.0", (), "clean",
              "the release with its findings' candidate fixes (finding 1: failures logged without Rich "
              "tracebacks; finding 4: a keep-alive past the SDK's idle connections; finding 5: a result the "
              "server believes delivered kept until its completed TTL): no false alarm once what the release is "
              "known to do wrong is fixed", fixes=FIXES_OF_FINDINGS),
    MatrixRow("retention", "skyrl==0.4.0", ("retention",), "caught",
              "retrieved-TTL clock started by dropped polls, TTL 120 s: lost results after a dropped poll (the "
              "contract-edge trial retrieved_ttl_edge loses every request, first of the property's trials)",
              caught_by=("no_lost_results",), only="test_no_lost_results"),
    MatrixRow("keepalive", "skyrl==0.4.0", ("keepalive",), "caught",
              "uvicorn's 5 s keep-alive and 2048 backlog: reconnect storms under completion bursts (nightly's "
              "known trial completion_burst)", caught_by=("unprovoked_resets",),
              on=(("ci", Expectation(
                  "clean", (), "a known blind spot of ci: the reset race needs a completion burst of thousands "
                  "of requests whose first polls come just before the client's idle expiry (nightly's "
                  "completion_burst); ci's draws make at most 256 requests and its 2,048-request size_burst polls "
                  "at once")),)),
    MatrixRow("rich-access-log", "skyrl==0.4.0", ("rich-access-log",), "clean",
              "a known blind spot of the absolute budgets: the access log through RichHandler costs the event "
              "loop ~0.6 ms per request, which stays under bounded_cpu's budget and which no other invariant "
              "sees; the rich-access-log-cost row (a comparison with the release) is the one that catches it"),
    MatrixRow("skyrl-0.3.0", "skyrl==0.3.0", (), "caught",
              "futures in SQLite, httpx forwarding: pool exhaustion and slow forwarding under bursts; finding 9: "
              "prompt logprobs asked for are dropped",
              caught_by=("no_lost_results", "bounded_fds", "clean_server_log", "healthz_latency", "no_collapse",
                         "result_integrity")),
    MatrixRow("skyrl-0.3.0-training", "skyrl==0.3.0", (), "caught",
              "training beside sampling on one SQLite pool (5 + 10): the pool exhausted, heartbeats starved and "
              "QueuePool timeouts under the 4-wave mix (fixed upstream in #2097); nightly only: the ci profile "
              "draws no training",
              caught_by=("heartbeats_answered", "training_futures", "clean_server_log"), only="test_training"),
    MatrixRow("newest-sdk", "skyrl==0.4.0", (), "caught",
              f"the release loaded through {NEWEST_SDK}, the SDK tinker-cookbook installs (SkyRL pins <0.26): "
              "finding 6, every sample the SDK makes fails once its result has arrived",
              fixes=FIXES_OF_FINDINGS, caught_by=FINDING_6_INVARIANTS, sdk=NEWEST_SDK),
    MatrixRow("newest-sdk-fixed", "skyrl==0.4.0", (), "clean",
              f"the fixed row loaded through {NEWEST_SDK}, with finding 6's candidate fix (asample answers one "
              "sequence id per sample): the newest SDK samples through the fault space as 0.25 does",
              fixes=FIXES_OF_FINDINGS + ("sample-sequence-ids",), sdk=NEWEST_SDK),
    MatrixRow("a-a", "skyrl==0.4.0", (), "clean",
              "the release compared with itself: no metric flagged (the thresholds' false-alarm row)",
              baseline="skyrl==0.4.0"),
    MatrixRow("rich-access-log-cost", "skyrl==0.4.0", ("rich-access-log",), "caught",
              "access log through RichHandler, compared with the release: its cost per request, which no "
              "absolute budget separates from clean", caught_by=("server_cpu_ms_per_request",),
              baseline="skyrl==0.4.0"),
    MatrixRow("a-a-long-result", "skyrl==0.4.0", (), "clean",
              "the release compared with itself on long results: no metric flagged at the long-result rows' size",
              baseline="skyrl==0.4.0", compare_trial=LONG_RESULT_TRIAL),
    MatrixRow("httpx-forwarding-cost", "skyrl==0.4.0", ("httpx-forwarding",), "caught",
              "forwarding through 0.3.0's httpx pool instead of aiohttp: httpcore rescans its pool per request "
              "(at the 4,096 burst the server collapses outright; at 1,024 it is a cost)",
              caught_by=("server_cpu_ms_per_request",), baseline="skyrl==0.4.0", compare_trial=LONG_RESULT_TRIAL),
    MatrixRow("proto-per-poll-cost", "skyrl==0.4.0", ("proto-per-poll",), "caught",
              "a forwarded result kept as JSON and encoded to proto by every poll, not once: a cost per token",
              caught_by=("server_cpu_ms_per_request",), baseline="skyrl==0.4.0", compare_trial=LONG_RESULT_TRIAL),
    MatrixRow("json-decode-cost", "skyrl==0.4.0", ("json-decode",), "caught",
              "router bodies decoded with json.loads instead of orjson: a cost per token",
              caught_by=("server_cpu_ms_per_request",), baseline="skyrl==0.4.0", compare_trial=LONG_RESULT_TRIAL),
    # A cost per request that grows with what the store holds (targets/skyrl_mutants_cost.py): at the 4,096 burst
    # every request pays for thousands held, on a small trial for a few hundred; in the large store for up to 16,384.
    MatrixRow("a-a-store", "skyrl==0.4.0", (), "clean",
              "the release compared with itself with a large store: no metric flagged at the store rows' size",
              baseline="skyrl==0.4.0", compare_trial=STORE_TRIAL),
    MatrixRow("lookup-by-scan-cost", "skyrl==0.4.0", ("lookup-by-scan",), "caught",
              "each poll finds its future by walking every entry of the store: a cost per request that grows with "
              "the results held (at the 4,096 burst x1.08, under the threshold: compared with a large store)",
              caught_by=("server_cpu_ms_per_request",), baseline="skyrl==0.4.0", compare_trial=STORE_TRIAL),
    MatrixRow("sweep-on-create-cost", "skyrl==0.4.0", ("sweep-on-create",), "caught",
              "every asample sweeps the whole store before adding its future: a cost per request that grows with "
              "the futures held", caught_by=("server_cpu_ms_per_request",), baseline="skyrl==0.4.0"),
    *MUTANT_ROWS,
    MatrixRow("tuft", TUFT_TARGET, (), "caught",
              "the second server family: TuFT's release through the fault space, judged by its own contract (a "
              "120 s hold ending in a try-again, results kept until it stops); sampling only, no training drawn; "
              "finding 8: a restart forgets every session, and samples on one are accepted, then lost",
              caught_by=FINDING_8_INVARIANTS, on=_NO_RESTART_ON_CI),
    MatrixRow("tuft-newest-sdk", TUFT_TARGET, (), "caught",
              f"TuFT's release loaded through {NEWEST_SDK}: finding 7, every sample the SDK makes refused with a "
              "422 (fields tinker 0.25's closed request model forbids)", caught_by=FINDING_7_INVARIANTS,
              sdk=NEWEST_SDK, on=(("nightly", Expectation(
                  "caught", FINDING_7_INVARIANTS + FINDING_8_INVARIANTS,
                  "finding 7, or finding 8 first: nightly's restart known trial runs before any drawn trial")),)),
    MatrixRow("tuft-newest-sdk-fixed", TUFT_TARGET, (), "clean",
              f"TuFT's release through {NEWEST_SDK} with finding 7's candidate fix: the newest SDK samples through "
              "the fault space", fixes=("newest-sdk-samples",), sdk=NEWEST_SDK, on=_FINDING_8_ON_NIGHTLY),
)
