"""The detection matrix's bug-class rows: one per regression a pull request could make (targets/skyrl_mutants*.py),
each with the invariants that must be the ones to catch it.

Data only, apart from the release, finding and comparison rows (``faultload.matrix.rows``, which lists these
among its ``DEFAULT_ROWS``): one catalogue per kind of row.
"""

from __future__ import annotations

from faultload.matrix.row import NOT_RUN, Expectation, MatrixRow

# A store that keeps what it no longer owes: releases_results (the known trial release_hold's hold past the
# TTLs), or the shared server's growth across the session.
KEEP_INVARIANTS = ("releases_results", "session_growth")

# Every regression row that runs the suite on SkyRL 0.4.0 is built on finding 1's candidate fix: it changes how
# a traceback is rendered and nothing a regression touches, and without it a backend fault that fails a few
# dozen forwards stalls the release itself, so that a row could be caught by finding 1 in place of its
# regression (keepalive and rich-access-log were, on ci: their 94-request trial failed 3 of 3 with the
# keepalive switch, 1 of 1 on the bare release, 0 of 3 with the fix). The other findings' fixes are left out:
# keepalive-past-sdk sets what the keepalive regression sets, and retain-until-expiry moves the delivery clock
# the TTL mutants move.
REGRESSION_BASE_FIXES = ("plain-tracebacks",)

# ci draws no process fault (a restart costs a real server start-up): a bug only a restart shows is nightly's.
NO_RESTART_ON_CI = (("ci", Expectation("clean", (), "ci draws no server:restart, the only way this bug shows")),)


def _mutant(switch: str, why: str, caught_by: tuple[str, ...], row: str | None = None, **kwargs) -> MatrixRow:
    """A row for one bug-class regression (targets/skyrl_mutants.py) on ``REGRESSION_BASE_FIXES``, named after
    its switch unless ``row``."""
    return MatrixRow(
        row or switch,
        "skyrl==0.4.0",
        (switch,),
        "caught",
        why,
        fixes=REGRESSION_BASE_FIXES,
        caught_by=caught_by,
        **kwargs,
    )


# The bug classes a pull request could introduce (README, "Time scale and regressions"), each with the
# invariants that must be the ones to catch it.
MUTANT_ROWS: tuple[MatrixRow, ...] = (
    _mutant(
        "never-resolve-on-failure",
        "a failed forward never completes its future: the client polls forever "
        "(the watchdog's no_progress stops such a trial, leaving its requests indeterminate)",
        ("futures_resolve", "no_collapse"),
    ),
    _mutant(
        "early-408",
        "the long poll answers 408 after 1 SDK s instead of 300: every client re-polls",
        ("polls_held", "retry_amplification"),
        only="test_bounded_retries",
    ),
    _mutant(
        "id-reuse-after-restart",
        "ids start at -1 in every server process: a pre-restart id polled after "
        "a restart gets another request's result",
        ("result_integrity",),
        on=NO_RESTART_ON_CI,
    ),
    _mutant(
        "500-for-unknown",
        "an unknown (pre-restart or expired) id answers 500, which the client retries "
        "forever, not 404 (each 500's traceback stalls the loop, which extends the resolve bound); ci meets an "
        "expired id: a result the server counts delivered on a poll dropped as it arrived, swept at its "
        "retrieved TTL before the client is back",
        ("futures_resolve", "clean_server_log", "no_collapse"),
    ),
    _mutant(
        "blocking-call",
        "a 10 ms blocking call on the event loop per asample",
        ("healthz_latency", "no_collapse", "retry_amplification"),
    ),
    _mutant(
        "mixed-results",
        "the request id kept on the shared forwarding client across the forward's await: "
        "results stored under another request's id",
        ("result_integrity", "futures_resolve"),
    ),
    _mutant(
        "pending-ttl-short",
        "a 60 s pending TTL (an hour written in minutes): forwards pending over a minute swept, their results dropped",
        ("no_lost_results", "clean_server_log"),
    ),
    _mutant(
        "swapped-ttls",
        "the store's TTLs under each other's keyword: an undelivered result kept 300 s, not 600",
        ("no_lost_results",),
    ),
    _mutant("truncated-result", "every sequence's last token dropped", ("result_integrity",)),
    _mutant(
        "empty-200-on-failure",
        "a failed forward answered 200 with zero sequences instead of an error",
        ("result_integrity",),
    ),
    # measured on ci: the sessions' creation and leaked connectors stall the loop before any close is logged
    _mutant(
        "session-per-request",
        "a new aiohttp session per forward, never closed",
        ("clean_server_log", "healthz_latency", "no_collapse"),
    ),
    # a CPU comparison with the release at the 4,096 burst did not separate it (ratio 1.19, interval 0.98-1.47);
    # the router's completion log counts every prompt it answered
    _mutant(
        "double-forward",
        "every sample forwarded to the router twice: each prompt completed twice with no "
        "fault that could lose the first answer",
        ("forwarded_once",),
    ),
    # One extra poll per request stays inside retry_amplification's budget (3) and futures_resolve's bound;
    # the contract's polls_woken sees the poll held past its result (a trial at 0.05: 64 of 128 polls).
    _mutant(
        "lost-wakeup",
        "a completed result wakes no held poll, delivered only by the client's next poll",
        ("polls_held",),
    ),
    # The contract's time edges (targets/skyrl_mutants_time.py), met by the edge trials (strategies/edges.py)
    # every session: a random draw places a client just inside a TTL only by chance.
    _mutant(
        "completed-ttl-from-creation",
        "a completed result's TTL measured from its creation: a result whose "
        "generation took long is swept that much sooner after it completes (completed_ttl_edge)",
        ("no_lost_results",),
        only="test_no_lost_results",
    ),
    _mutant(
        "retrieved-ttl-from-completion",
        "a delivered result's grace measured from its completion: a result "
        "delivered late in its life is swept at once after the delivery (retrieved_ttl_edge)",
        ("no_lost_results",),
        only="test_no_lost_results",
    ),
    _mutant(
        "retrieved-ttl-short",
        "the retry grace cut from 300 s to 120 s, under the SDK's 150 s worst-case "
        "re-poll gap, the is_disconnected guard kept (retrieved_ttl_edge)",
        ("no_lost_results",),
        only="test_no_lost_results",
    ),
    # Limits that bite only past a thousand in flight (targets/skyrl_mutants_size.py), met by size_burst.
    _mutant(
        "store-capped",
        "at most 1,000 futures kept, the oldest dropped: past a thousand in flight, pending "
        "futures are evicted before their results arrive (size_burst)",
        ("no_lost_results", "clean_server_log"),
        only="test_bounded_resources",
    ),
    _mutant(
        "results-capped",
        "the sweep keeps at most 10,000 finished results, the oldest dropped: results owed "
        "past that count are evicted before their polls (size_flood, nightly's 16,384 owed at once)",
        ("no_lost_results",),
        only="test_all_invariants",
        on=(
            (
                "ci",
                Expectation(
                    NOT_RUN,
                    (),
                    "ci's largest trial owes 2,048 results at once (size_burst), under the cap, "
                    "and its property draws 6 trials there, under ci's minimum of 7 judged; the 16,384 of "
                    "size_flood take a full-time trial of minutes: nightly runs it",
                ),
            ),
        ),
    ),
    _mutant(
        "forwarding-pool-default",
        "the forwarding connector built without its limit: aiohttp's default 100 "
        "connections where the configuration says none (size_burst)",
        ("forwards_concurrent",),
        only="test_bounded_resources",
    ),
    _mutant(
        "forwarding-semaphore",
        "at most 256 forwards at once (vLLM's max_num_seqs), the rest queued inside the server (size_burst)",
        ("forwards_concurrent",),
        only="test_bounded_resources",
    ),
    # What the store keeps (targets/skyrl_mutants_keep.py): every request is answered right, so only the known
    # trial release_hold (bounded_resources, ci) sees the results kept past their TTL, or the session's growth.
    *(
        _mutant(switch, why, KEEP_INVARIANTS, only="test_bounded_resources")
        for switch, why in (
            ("keep-delivered", "the sweep never evicts a delivered result: the store grows with every request"),
            ("evict-pending-only", "the sweep evicts abandoned pending forwards only: completed results stay"),
            (
                "naive-completed-at",
                "completed_at stored without a timezone: the first sweep meeting a completed, "
                "undelivered result raises TypeError and the sweeper task dies silently",
            ),
            (
                "sweep-counts-bytes",
                "each sweep sums its results' proto lengths: a failed forward's entry (no proto) "
                "raises TypeError and the sweeper task dies silently",
            ),
        )
    ),
)
