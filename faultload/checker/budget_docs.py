"""What each budget of :class:`~faultload.checker.budgets.Budgets` is: its unit, the invariants it serves, and why
its default is what it is.

The one place a budget's reason is written: ``docs/reference/invariants.md`` is generated from it
(``python scripts/reference.py``), and ``tests/unit/test_budgets.py`` holds every field of ``Budgets`` to an entry
here. Plain data (no numpy), cheap to import.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BudgetDoc:
    """One budget's unit, the invariants that read it, and the reason for its default (Markdown)."""

    unit: str
    invariants: tuple[str, ...]
    why: str


BUDGET_DOCS: dict[str, BudgetDoc] = {
    # File descriptors
    "fds_per_in_flight": BudgetDoc(
        "fds per request in flight at the server",
        ("bounded_fds",),
        "SkyRL 0.4.0 holds about 2 fds per request in flight (the client's connection and its forward to the "
        "router); one more per request leaves room for keep-alive connections lingering between polls and for the "
        "SQLite and aiohttp pools, while a server that leaks one socket per request (growth with the total "
        "requests) still fails.",
    ),
    "fds_slack": BudgetDoc(
        "fds",
        ("bounded_fds",),
        "Constant headroom over the baseline for listening sockets, pool warm-up, log files and the health prober.",
    ),
    "drain_fds_epsilon": BudgetDoc(
        "fds",
        ("bounded_fds",),
        "After the load has drained, fds must be back within this of the baseline: keep-alive connections and "
        "pools close promptly, so anything more is a leak.",
    ),
    "drain_fds_db_pool": BudgetDoc(
        "fds, added for a trial that trained",
        ("bounded_fds",),
        "The SQLAlchemy pool keeps its 5 SQLite connections open after training (`model.training.DB_POOL_FDS`).",
    ),
    # Memory
    "rss_bytes_per_in_flight_result_byte": BudgetDoc(
        "bytes of RSS per byte of result in flight",
        ("bounded_rss",),
        "RSS may grow by this many bytes per byte of result in flight: the proto bytes from the router, the "
        "response body, Python object overhead and allocator slack.",
    ),
    "rss_slack_bytes": BudgetDoc(
        "bytes",
        ("bounded_rss",),
        "Constant headroom: imports done lazily on the first request, aiohttp and uvicorn buffers, the SQLite "
        "cache, allocator arenas.",
    ),
    "drain_rss_epsilon_bytes": BudgetDoc(
        "bytes",
        ("bounded_rss",),
        "After the drain RSS must be within this of the baseline plus the retained fraction "
        "(`drain_rss_growth_fraction`).",
    ),
    "drain_rss_growth_fraction": BudgetDoc(
        "fraction of (peak − baseline)",
        ("bounded_rss",),
        "A CPython process rarely gives freed memory back: glibc keeps freed heap chunks behind long-lived "
        "allocations and pymalloc only returns wholly empty arenas (Python 3.11, 200k result-sized objects with a "
        "few long-lived ones interleaved, all freed: 88% of the peak growth stayed resident). A smaller default "
        "would flag healthy servers, so by default the drain check only demands that RSS stops growing once the "
        "load is over (drained ≤ peak + epsilon); retained results are caught by the peak check, whose budget "
        "follows the in-flight count, not the total. Lower it for a server known to return memory.",
    ),
    "retention_window_s": BudgetDoc(
        "SDK seconds (× time scale)",
        ("bounded_rss", "no_lost_results"),
        "How long the server keeps a delivered result for a retrying client. Unset, the target family's "
        "contract says: SkyRL 0.4.0's retrieved TTL (300 s, `--retrieved-ttl`); TuFT keeps every result until it "
        "stops (no window). Results completed within this window before a sample count towards that sample's "
        "RSS budget.",
    ),
    "expiry_window_s": BudgetDoc(
        "SDK seconds (× time scale)",
        ("no_lost_results",),
        "How long a correct server keeps a completed result a client has not come back for. Unset, the target "
        "family's contract says: SkyRL 0.4.0's completed TTL (600 s, longer than its retrieved TTL, so delivered "
        "or not the result may be gone after it); TuFT never drops one, so no 404 is an expiry. A 404 for a "
        "result older than this is an expiry by design, not a loss.",
    ),
    "retained_result_overhead_bytes": BudgetDoc(
        "bytes per retained result",
        ("bounded_rss",),
        "What the server holds for a retained result besides its bytes (its future object, event, dict entry). "
        "Measured on 0.4.0 in the 131,072-request confirm run: ~2.5 KB per retained 64-token result.",
    ),
    "in_flight_request_overhead_bytes": BudgetDoc(
        "bytes per request in flight",
        ("bounded_rss",),
        "What the server holds for a request in flight besides its result (its connection, handler coroutine, "
        "forwarding task and client connection). Measured on 0.4.0 in the 131,072-request confirm run (7,896 in "
        "flight): RSS grew ~48 KB per request in flight.",
    ),
    # Health
    "healthz_p99_s": BudgetDoc(
        "seconds",
        ("healthz_latency",),
        "`/healthz` does no work, so its latency is the time the server's one event loop makes it wait. Clean "
        "SkyRL 0.4.0 on 2 cores shared with the load, under the plain 20,000-request trial (2,000 outstanding, "
        "engine-bound router), answers with a p99 of 1.1-2.0 s; 2.5 s is above that spread and far below what a "
        "starved loop shows (10 s and more once the server is saturated). Set it to your liveness probe's "
        "timeout in production terms.",
    ),
    "healthz_max_failures": BudgetDoc(
        "probes",
        ("healthz_latency",),
        "Failed probes allowed during load (the larger of this and `healthz_failure_fraction` applies). The probe "
        "bypasses the fault proxies, so by default no failure is excused.",
    ),
    "healthz_failure_fraction": BudgetDoc(
        "fraction of probes",
        ("healthz_latency",),
        "Failed probes allowed during load, as a fraction (the larger of this and `healthz_max_failures` "
        "applies); none by default, as above.",
    ),
    "healthz_fault_recovery_s": BudgetDoc(
        "real seconds",
        ("healthz_latency",),
        "Probes from a fault's start to this long after its end are reported but not judged: a server may slow "
        "down while its backend fails; what production asks is that it recovers before its liveness probe gives "
        "up. 30 s is Kubernetes' default liveness tolerance (period 10 s × failureThreshold 3). A stall that "
        "outlasts it is judged as usual, and a collapse is judged by `no_collapse` at any time. Real seconds, not "
        "trial seconds: an event loop's stall does not scale.",
    ),
    # CPU
    "server_cpu_ms_per_request": BudgetDoc(
        "ms of server CPU per HTTP request",
        ("bounded_cpu",),
        "Unset, the target family's calibrated figure: each family's clean release has its own cost per request. "
        "SkyRL: 3.0 ms, calibrated against clean SkyRL 0.4.0 at time scale 0.05 on 2-core machines, where its CPU "
        "per request moves ~1.8× from one machine to another: the `cpu_sample` known trial (1,200 × 64 tokens, 100 "
        "held, immediate router) measured 0.78-1.28 ms on a fast one and 1.43-1.91 ms on a slow one; 3.0 ms (plus "
        "`server_cpu_ms_per_result_kib`) is ~55% over the highest clean figure: it bounds gross regressions "
        "(about twice clean's CPU per request and more). TuFT: 5.5 ms; clean TuFT 0.2.2 spends 2.4× SkyRL 0.4.0's "
        'CPU per request side by side on one machine (`bench/server_cpu.py --against "--target tuft==0.2.2"`: '
        "1.48 against 0.62 ms in `cpu_sample`, 2.20 against 0.91 ms at 2,048 × 16 tokens), 3.40 ms at its highest "
        "on a slow machine; 5.5 ms is ~60% over that. Much of TuFT's gap is finding 10, a cost that grows with "
        "each session's length (with `--fix history-in-order`: 1.39 against 2.31 ms at 2,048 × 16 tokens); the "
        "release climbs past this budget at 16,384 samples (7.7-8.5 ms), where it catches it. hatchery-core: 3.0 ms, "
        "SkyRL's: clean hatchery-core 0.3.0 spent 1.0-2.0× SkyRL 0.4.0's CPU per request in `cpu_sample`, run after "
        "it in the same `faultload conformance` (0.80, 0.82 and 0.62 against 0.41, 0.41 and 0.61 ms), at most ~1.5 ms "
        "scaled by SkyRL's 1.8× from machine to machine; 3.0 ms is twice that. twinkle-kit: 70 ms: clean twinkle-kit "
        "0.5.1 spent 39.4 ms per HTTP request in `cpu_sample` (120.4 s of CPU over 3,058 requests, summed over its "
        "process tree, the workers Ray ended included), run after SkyRL 0.4.0's 0.82 ms in the same `faultload "
        "conformance` (48×; 34.7 ms in an earlier run that missed the ended workers' CPU): a request crosses "
        "Serve's proxy, the gateway replica, the sampler replica and a Ray actor call, a held poll reads the state "
        "actor every 0.5 s, and Ray's own processes (GCS, raylet, agents, idle workers) spend CPU all the while; "
        "70 ms is 1.8× that figure. It does not catch "
        "`--regress rich-access-log` on small "
        "results (+~0.6 ms per request): no one absolute budget separates that from clean across machines "
        "without false alarms; the `rich-access-log-cost` comparison row (both builds on one machine in one run) "
        "does.",
    ),
    "server_cpu_ms_per_result_kib": BudgetDoc(
        "ms of server CPU per KiB of result per HTTP request",
        ("bounded_cpu",),
        "The cost that grows with the result: clean 0.4.0 measured a slope of ~0.015-0.024 ms per KiB "
        "(2.01-2.05 ms per request with 15.9 KiB results, 4.86 ms with 271 KiB).",
    ),
    "server_cpu_ms_per_training_request": BudgetDoc(
        "ms of server CPU per training HTTP attempt",
        ("bounded_cpu",),
        "Taken off the server's CPU before the per-request budget applies: clean 0.4.0 spent ~3.2-3.5 ms per "
        "training attempt beyond the samples' share, 4.1 ms in the 4-wave known trial.",
    ),
    "cpu_min_requests": BudgetDoc(
        "HTTP requests",
        ("bounded_cpu",),
        "Below this the verdict is unknown: an idle loop, the probes and the drain weigh too much.",
    ),
    # Retries
    "attempts_per_request": BudgetDoc(
        "mean HTTP attempts per request",
        ("retry_amplification",),
        "A request costs 2 attempts when all goes well (one `asample` POST, one `retrieve_future` poll), so this "
        "allows one extra attempt per request on average (re-polls after a long-poll timeout, one retried "
        "submit). The shape's abandoned-poll fraction is added on top (each abandoned first poll costs exactly "
        "one more).",
    ),
    "attempts_per_request_max": BudgetDoc(
        "attempts for any one request",
        ("retry_amplification",),
        "Bounds a single request's retry loop so that a retry storm shows: the SDK re-polls connection errors "
        "with no count limit, backing off to 30 s, so even a 720 s outage costs about 30; 50 leaves room for "
        "re-polls.",
    ),
    # Resets
    "unprovoked_resets_max": BudgetDoc(
        "HTTP attempts",
        ("unprovoked_resets",),
        "Attempts that ended in a connection reset or a failed connect while no fault was in force. On a healthy "
        "loopback network a correct server causes none: the client (as the SDK) closes idle connections after "
        "5 s, before the server's 75 s keep-alive, and a connect waits in the accept backlog rather than fail.",
    ),
    # Server log
    "clean_log_allow": BudgetDoc(
        "regular expressions",
        ("clean_server_log",),
        "An error class whose name or example line matches one (`re.search`) is not counted; none by default.",
    ),
    "log_fault_grace_s": BudgetDoc(
        "trial seconds",
        ("clean_server_log", "unprovoked_resets", "polls_held", "forwarded_once"),
        "An error logged (or an attempt reset) up to this long after a fault was removed still counts as during "
        "the fault: the server logs a failure when its timeout or retry ends, after the cause.",
    ),
    # Liveness
    "resolve_slack_s": BudgetDoc(
        "real seconds",
        ("futures_resolve", "no_lost_results"),
        "Besides one poll timeout and one backoff cap (scaled), how long an accepted request may take to end "
        "after its release (the router answered or failed, the last fault that could hold it healed): the "
        "server's queued work and the load workers' own scheduling on a loaded machine, which do not scale.",
    ),
    # Polls
    "poll_wake_slack_s": BudgetDoc(
        "real seconds",
        ("polls_held",),
        "How long after the router completed a request a held poll may still end without its result (the "
        "client's timeout, a 408): the server reads the router's answer, stores it and wakes the poll in "
        "milliseconds unless its loop is busy; a busy loop (`/healthz` slower than this) or a fault in force is "
        "not judged.",
    ),
    "drop_notice_slack_s": BudgetDoc(
        "real seconds",
        ("no_lost_results",),
        "How long after the client dropped a poll the server may still answer it with a result the router "
        "completed just then, and count that result delivered (its retrieved TTL runs from then): the client's "
        "close crosses the edge proxy and waits its turn on the server's loop before the server can see it. "
        "Measured on an idle SkyRL 0.4.0: a result completed 0.42 ms after the client dropped its poll was "
        "counted delivered (swept at its retrieved TTL), others 0.16–4.95 ms after were not; 0.1 s leaves a "
        "loaded loop room while a poll dropped longer before its result is still never a delivery.",
    ),
    "forwarding_concurrency_share": BudgetDoc(
        "the router's peak in flight over the forwards owed at once (capped by the configured connections)",
        ("forwards_concurrent",),
        "SkyRL 0.4.0 (no forwarding cap by default) forwards everything it owes at once: its router held 2,048 "
        "of 2,048 owed in the `size_burst` known trial and 1,049 of 1,053 in an unramped 2,048 burst (1.00 both); "
        "a forwarding connector at aiohttp's default 100 connections held 0.05 of what it owed, a 256-forward "
        "semaphore 0.12. Half is a ceiling by any reading, far from both.",
    ),
    "forwarding_min_owed": BudgetDoc(
        "forwards owed at once",
        ("forwards_concurrent",),
        "Below this a ceiling cannot be told from the trial's own size: the small draws hold at most a few "
        "hundred at once (ci: 256), and a ceiling that bites there bites every server's engine too; the ceilings "
        "a pull request brings (a pool's default 100, vLLM's 256 slots) bite past it.",
    ),
    "forwarding_min_hold_s": BudgetDoc(
        "real seconds the router holds each forward at least",
        ("forwards_concurrent",),
        "A request is owed a forward from its submit's answer to the router's completion: the server's own time "
        "to send it, then the router's hold. Only where the hold dominates is the router's peak the server's "
        "ceiling: under a 16,384-request burst 0.4.0 owed 394 at once to an immediate router that held 3 (its "
        "event loop's queue to send them, some 0.66 s at ~600 a second), a share of 0.01 with no ceiling. A hold "
        "of 1 s (the latency router's default generation) against that queue keeps the share of a server with "
        "none at 1 / 1.66 = 0.60, above the 0.5 budget; the immediate router (0 s) is not judged.",
    ),
    # Training
    "heartbeat_gap_s": BudgetDoc(
        "real seconds",
        ("heartbeats_answered",),
        "The longest a training session may go between answered heartbeats: the SDK warns the user after 120 s "
        '("the session will be terminated"); SkyRL expires the session at 300 s.',
    ),
    # What the server keeps
    "release_held_per_delivered": BudgetDoc(
        "MiB of RSS held per MiB of results delivered",
        ("releases_results",),
        "Once every result is past the family's longest TTL and a sweep, a correct server holds none of them. "
        "Measured with `bench/release_rss.py` (256 results of 256 KiB, time scale 0.05, glibc's mmap threshold "
        "held at 128 KiB by the SkyRL launcher): clean 0.4.0 0.12-0.15, a store that never evicts 1.12-1.13 "
        "(the results and their allocator pages); 0.25 sits between with room for the interpreter's own "
        "growth in a trial. Without the held threshold clean 0.4.0 kept 0.60 (glibc's heap keeps freed "
        "blocks), too close to the leak's 1.29 to tell them apart.",
    ),
    "release_min_result_bytes": BudgetDoc(
        "bytes of results delivered",
        ("releases_results",),
        "Below this a kept result does not stand out of the RSS's trial-to-trial noise (a few MiB: lazily "
        "imported modules, pools, allocator arenas): the verdict is unknown, never ok.",
    ),
    "session_rss_mib_per_k_requests": BudgetDoc(
        "MiB of RSS per 1,000 sample requests served",
        ("session_growth",),
        "The slope of the shared server's RSS at each trial's start against the requests it has served, over the "
        "starts after its high-water marks: in the later half of its requests and after its largest trial in "
        "requests and in result tokens (a lane of the ci fixed row, 2026-12-07, met its 216 x 868 x 3-token trials "
        "late: +18 MiB that stayed, +7.49 per 1,000 over the later half; unknown after them). A correct server's RSS "
        "at a trial's start holds only what its TTLs still keep (at time scale 0.05 the last 30 s of results) and "
        "what its largest load left: on the ci fixed row (2026-12-05) a trial holding 2,048 requests at once left "
        "+204 MiB that stayed flat (a line over the whole session read +32.8 MiB per 1,000; over the later half, "
        "3,850-6,769 requests, -8.5). One that keeps release_hold's results grows 250 per 1,000; one that keeps "
        "every 64-token result ~3 (`retained_result_overhead_bytes`), under this budget: `releases_results` is "
        "what sees a store that keeps results, this the leaks that outgrow a session's noise.",
    ),
    "session_fds_per_k_requests": BudgetDoc(
        "fds per 1,000 sample requests served",
        ("session_growth",),
        "The suite waits for the server's fds to come back to their baseline before each trial, so a correct "
        "server's fds at a trial's start do not grow; a socket leaked per request grows 1,000.",
    ),
    "session_min_requests": BudgetDoc(
        "sample requests",
        ("session_growth",),
        "Fewer requests served between the first and last trial starts measured on one server process leave "
        "the slope to the noise: the verdict is unknown.",
    ),
}
