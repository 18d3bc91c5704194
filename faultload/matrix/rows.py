"""The detection matrix's rows: each a build and the result the suite must give it (``faultload matrix``).

Data only, beside the code that runs them (``faultload.matrix.run``), which re-exports them. What a row is
(``MatrixRow``, ``Expectation``) is ``faultload.matrix.row``; the bug-class rows, one per regression a pull
request could make, are ``faultload.matrix.mutant_rows``; here are the releases, the findings, the comparison
rows and the second family's, with those among them in ``DEFAULT_ROWS``.
"""

from __future__ import annotations

from faultload.compare.rows import LONG_RESULT_TRIAL, STORE_TRIAL
from faultload.matrix.mutant_rows import MUTANT_ROWS, NO_RESTART_ON_CI, REGRESSION_BASE_FIXES
from faultload.matrix.row import NOT_RUN, Expectation, MatrixRow

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
_FINDING_8_ON_NIGHTLY = (
    (
        "nightly",
        Expectation(
            "caught",
            FINDING_8_INVARIANTS,
            "nightly's restart known trial meets finding 8 (a restart forgets every session)",
        ),
    ),
)
FIXES_OF_FINDINGS = ("plain-tracebacks", "keepalive-past-sdk", "retain-until-expiry")

DEFAULT_ROWS: tuple[MatrixRow, ...] = (
    MatrixRow(
        "clean",
        "skyrl==0.4.0",
        (),
        "caught",
        "SkyRL 0.4.0 has finding 1 (the Rich-traceback stall): a backend fault that fails a few dozen forwards "
        "at once meets it, and ci's derandomized draws hold one (backend:timeout over 33 forwards: 3.62 "
        "attempts per request, /healthz 10 s; with --fix plain-tracebacks 2.00); the fixed row is the "
        "no-false-alarm row",
        caught_by=FINDING_1_INVARIANTS,
        on=(
            (
                "nightly",
                Expectation(
                    "caught",
                    FINDING_1_INVARIANTS + FINDING_5_INVARIANTS,
                    "SkyRL 0.4.0 has finding 1 (the Rich-traceback stall): nightly's backend faults meet it; and "
                    "finding 5 (a result written into a half-open edge swept before its client is back): nightly's "
                    "known trial half_open_delivery meets it; the fixed row is the no-false-alarm row",
                ),
            ),
        ),
    ),
    MatrixRow(
        "fixed",
        "skyrl==0.4.0",
        (),
        "clean",
        "the release with its findings' candidate fixes (finding 1: failures logged without Rich "
        "tracebacks; finding 4: a keep-alive past the SDK's idle connections; finding 5: a result the "
        "server believes delivered kept until its completed TTL): no false alarm once what the release is "
        "known to do wrong is fixed",
        fixes=FIXES_OF_FINDINGS,
    ),
    MatrixRow(
        "retention",
        "skyrl==0.4.0",
        ("retention",),
        "caught",
        "retrieved-TTL clock started by dropped polls, TTL 120 s: lost results after a dropped poll (the "
        "contract-edge trial retrieved_ttl_edge loses every request, first of the property's trials)",
        fixes=REGRESSION_BASE_FIXES,
        caught_by=("no_lost_results",),
        only="test_no_lost_results",
    ),
    MatrixRow(
        "keepalive",
        "skyrl==0.4.0",
        ("keepalive",),
        "caught",
        "uvicorn's 5 s keep-alive and 2048 backlog: the server closes an idle connection as the SDK, whose idle "
        "expiry is the same 5 s, reuses it (reset with no fault in force; ci meets it in its real-SDK trials), and "
        "reconnect storms under completion bursts (nightly's known trial completion_burst)",
        fixes=REGRESSION_BASE_FIXES,
        caught_by=("unprovoked_resets",),
    ),
    MatrixRow(
        "rich-access-log",
        "skyrl==0.4.0",
        ("rich-access-log",),
        "clean",
        "a known blind spot of the absolute budgets: the access log through RichHandler costs the event "
        "loop ~0.6 ms per request, which stays under bounded_cpu's budget and which no other invariant "
        "sees; the rich-access-log-cost row (a comparison with the release) is the one that catches it",
        fixes=REGRESSION_BASE_FIXES,
    ),
    MatrixRow(
        "skyrl-0.3.0",
        "skyrl==0.3.0",
        (),
        "caught",
        "futures in SQLite, httpx forwarding: pool exhaustion and slow forwarding under bursts; finding 9: "
        "prompt logprobs asked for are dropped",
        caught_by=(
            "no_lost_results",
            "bounded_fds",
            "clean_server_log",
            "healthz_latency",
            "no_collapse",
            "result_integrity",
        ),
    ),
    MatrixRow(
        "skyrl-0.3.0-training",
        "skyrl==0.3.0",
        (),
        "caught",
        "training beside sampling on one SQLite pool (5 + 10): the pool exhausted, heartbeats starved and "
        "QueuePool timeouts under the 4-wave mix (fixed upstream in #2097); nightly only: the ci profile "
        "draws no training",
        caught_by=("heartbeats_answered", "training_futures", "clean_server_log"),
        only="test_training",
        on=(("ci", Expectation(NOT_RUN, (), "the ci profile draws no training; nightly runs it")),),
    ),
    MatrixRow(
        "newest-sdk",
        "skyrl==0.4.0",
        (),
        "caught",
        f"the release loaded through {NEWEST_SDK}, the SDK tinker-cookbook installs (SkyRL pins <0.26): "
        "finding 6, every sample the SDK makes fails once its result has arrived",
        fixes=FIXES_OF_FINDINGS,
        caught_by=FINDING_6_INVARIANTS,
        sdk=NEWEST_SDK,
    ),
    MatrixRow(
        "newest-sdk-fixed",
        "skyrl==0.4.0",
        (),
        "clean",
        f"the fixed row loaded through {NEWEST_SDK}, with finding 6's candidate fix (asample answers one "
        "sequence id per sample): the newest SDK samples through the fault space as 0.25 does",
        fixes=FIXES_OF_FINDINGS + ("sample-sequence-ids",),
        sdk=NEWEST_SDK,
    ),
    MatrixRow(
        "a-a",
        "skyrl==0.4.0",
        (),
        "clean",
        "the release compared with itself: no metric flagged (the thresholds' false-alarm row)",
        baseline="skyrl==0.4.0",
    ),
    MatrixRow(
        "rich-access-log-cost",
        "skyrl==0.4.0",
        ("rich-access-log",),
        "caught",
        "access log through RichHandler, compared with the release: its cost per request, which no "
        "absolute budget separates from clean",
        caught_by=("server_cpu_ms_per_request",),
        baseline="skyrl==0.4.0",
    ),
    MatrixRow(
        "a-a-long-result",
        "skyrl==0.4.0",
        (),
        "clean",
        "the release compared with itself on long results: no metric flagged at the long-result rows' size",
        baseline="skyrl==0.4.0",
        compare_trial=LONG_RESULT_TRIAL,
    ),
    MatrixRow(
        "httpx-forwarding-cost",
        "skyrl==0.4.0",
        ("httpx-forwarding",),
        "caught",
        "forwarding through 0.3.0's httpx pool instead of aiohttp: httpcore rescans its pool per request "
        "(at the 4,096 burst the server collapses outright; at 1,024 it is a cost)",
        caught_by=("server_cpu_ms_per_request",),
        baseline="skyrl==0.4.0",
        compare_trial=LONG_RESULT_TRIAL,
    ),
    MatrixRow(
        "proto-per-poll-cost",
        "skyrl==0.4.0",
        ("proto-per-poll",),
        "caught",
        "a forwarded result kept as JSON and encoded to proto by every poll, not once: a cost per token",
        caught_by=("server_cpu_ms_per_request",),
        baseline="skyrl==0.4.0",
        compare_trial=LONG_RESULT_TRIAL,
    ),
    MatrixRow(
        "json-decode-cost",
        "skyrl==0.4.0",
        ("json-decode",),
        "caught",
        "router bodies decoded with json.loads instead of orjson: a cost per token",
        caught_by=("server_cpu_ms_per_request",),
        baseline="skyrl==0.4.0",
        compare_trial=LONG_RESULT_TRIAL,
    ),
    # A cost per request that grows with what the store holds (targets/skyrl_mutants_cost.py): at the 4,096 burst
    # every request pays for thousands held, on a small trial for a few hundred; in the large store for up to 16,384.
    MatrixRow(
        "a-a-store",
        "skyrl==0.4.0",
        (),
        "clean",
        "the release compared with itself with a large store: no metric flagged at the store rows' size",
        baseline="skyrl==0.4.0",
        compare_trial=STORE_TRIAL,
    ),
    MatrixRow(
        "lookup-by-scan-cost",
        "skyrl==0.4.0",
        ("lookup-by-scan",),
        "caught",
        "each poll finds its future by walking every entry of the store: a cost per request that grows with "
        "the results held (at the 4,096 burst x1.08, under the threshold: compared with a large store)",
        caught_by=("server_cpu_ms_per_request",),
        baseline="skyrl==0.4.0",
        compare_trial=STORE_TRIAL,
    ),
    MatrixRow(
        "sweep-on-create-cost",
        "skyrl==0.4.0",
        ("sweep-on-create",),
        "caught",
        "every asample sweeps the whole store before adding its future: a cost per request that grows with "
        "the futures held",
        caught_by=("server_cpu_ms_per_request",),
        baseline="skyrl==0.4.0",
    ),
    *MUTANT_ROWS,
    MatrixRow(
        "tuft",
        TUFT_TARGET,
        (),
        "caught",
        "the second server family: TuFT's release through the fault space, judged by its own contract (a "
        "120 s hold ending in a try-again, results kept until it stops); sampling only, no training drawn; "
        "finding 8: a restart forgets every session, and samples on one are accepted, then lost (finding 10, a "
        "cost that grows with each session's length, is caught from ~8,000 samples in one trial)",
        caught_by=FINDING_8_INVARIANTS,
        on=NO_RESTART_ON_CI,
    ),
    MatrixRow(
        "tuft-newest-sdk",
        TUFT_TARGET,
        (),
        "caught",
        f"TuFT's release loaded through {NEWEST_SDK}: finding 7, every sample the SDK makes refused with a "
        "422 (fields tinker 0.25's closed request model forbids)",
        caught_by=FINDING_7_INVARIANTS,
        sdk=NEWEST_SDK,
        on=(
            (
                "nightly",
                Expectation(
                    "caught",
                    FINDING_7_INVARIANTS + FINDING_8_INVARIANTS,
                    "finding 7, or finding 8 first: nightly's restart known trial runs before any drawn trial",
                ),
            ),
        ),
    ),
    MatrixRow(
        "tuft-newest-sdk-fixed",
        TUFT_TARGET,
        (),
        "clean",
        f"TuFT's release through {NEWEST_SDK} with finding 7's candidate fix: the newest SDK samples through "
        "the fault space",
        fixes=("newest-sdk-samples",),
        sdk=NEWEST_SDK,
        on=_FINDING_8_ON_NIGHTLY,
    ),
)
