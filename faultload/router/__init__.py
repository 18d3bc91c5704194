"""The fake vLLM router: answers ``POST /v1/completions`` from the prompt's nonce.

The server under test forwards each sample request here. Output tokens and
logprobs come from :mod:`faultload.model.tokens`, so the client can check that every
result belongs to its request without any state shared with the router.

Bodies
    Choice ``j`` of a request whose prompt decodes to ``nonce`` is shaped as a
    real engine's answers vary, by ``tokens.choice(nonce, j, max_tokens)``: one
    choice in ``tokens.STOP_EVERY`` ends on a stop token before the limit
    (``finish_reason = "stop"``, ``L < max_tokens`` tokens), the others at it
    (``"length"``, ``L = max_tokens``); one in ``tokens.NO_LOGPROBS_EVERY``
    comes with ``"logprobs": null`` (what vLLM occasionally returns under load,
    and SkyRL zero-fills). It carries ``token_ids = tokens.output_tokens(nonce,
    j, L)`` and, unless null, ``token_logprobs = -d/10000`` for ``d`` in
    ``tokens.logprob_digits(nonce, j, L)``; ``usage`` counts the tokens sent.
    Numbers are printed at
    fixed width from lookup tables by one numpy gather per array (token ids
    right-aligned with leading spaces, logprobs as ``-0.dddd``), so a
    multi-MB body costs a few milliseconds. Measured here (2 cores):
    T = 1,000,000, n = 1 gives a 14 MB body in 21-29 ms including token
    generation, i.e. ~490-660 MB/s (``python -m faultload.router --bench
    1000000``). Serving small bodies (T = 64) cost the Python router ~0.38 ms of
    CPU per request in a trial, start-up included, and the compiled one 0.32-0.43
    ms on a day the Python one cost 0.50-0.56 (``bench/harness_ab.py``).
    If the request asks for ``prompt_logprobs = k`` (k <= ``tokens.MAX_TOPK``,
    vLLM's default limit; more is a 400), every choice also carries vLLM's
    ``prompt_logprobs``: ``null`` for position 0, then per position ``i`` the
    prompt token's own ``{"<token id>": {"logprob", "rank", "decoded_token"}}``
    entry followed by the top ``k`` entries without it (``tokens.prompt_rank``,
    ``tokens.rank_digit``, ``tokens.alt_token``): ``k`` entries when the prompt
    token ranks in the top ``k``, ``k + 1`` when it does not.
    The compiled router (``go/body.go``) writes the same bytes.
    A prompt that is not a faultload prompt, or a bad ``n``/``max_tokens``,
    gets a 400 with a vLLM-style JSON error.

Modes (``--mode``)
    ``immediate``  answer at once.
    ``barrier``    requests form waves. An arriving request joins the current
                   wave and is held; the wave is released (all its requests
                   answered at once) when ``--barrier N`` requests are held
                   together, counted across all router processes, or when
                   ``--barrier-timeout S`` seconds have passed since the wave's
                   first request arrived. The next arrival starts a new wave.
                   A held request whose client disconnects leaves the wave
                   (the wave's timeout clock keeps its first arrival time).
                   ``--barrier-expect`` is not implemented.
    ``latency``    at most ``--max-num-seqs K`` requests generate at once,
                   router-wide (a shared counter across processes); each
                   generation is an ``asyncio.sleep(--gen-seconds G)``. The
                   others wait: FIFO within a process; between processes a
                   freed slot goes to whichever process polls first (every
                   5 ms), i.e. approximately FIFO.

Faults (``POST /control/...``, state shared by all processes; a new call for
the same fault replaces its window, ``seconds: 0`` ends it)
    ``stall {"seconds": S}``   for S s no response is written: requests are
        accepted and go through their mode (barrier, generation) but then wait
        just before their answer until the stall ends, then proceed normally.
    ``errors {"seconds": S, "status": 503}``  for S s every completions request
        is answered with that status (400..599) and a JSON error: new arrivals
        at once, and any request whose answer falls in the window.
    ``truncate {"seconds": S}``  for S s every 200 body is cut to its first
        ``len(body) // 2`` bytes; Content-Length is that truncated length, so
        the HTTP exchange is clean but the body is invalid JSON.
    ``reset``  ends all fault windows (held barrier requests stay held).
    stall, errors and truncate also take ``"until_monotonic": T`` (a
    ``time.monotonic()`` deadline; the clock is system-wide): the window ends
    at T if that is sooner, and a call processed after T does nothing.
    A crash is the parent killing the processes (:meth:`RouterHandle.crash`).

``SIGUSR1`` to a serving process (:meth:`RouterHandle.close_idle`, sent by a
trial once its load is over): if no completion is in flight in any process, it
closes every keep-alive connection it holds between requests at once, the idle
timeout of a real router running out, so the server's drain does not wait out
its own keep-alive. A connection just accepted stays (its first request may not
be read yet: the harness's own ``/stats`` call right after it was cut so). With
one in flight it closes nothing. The supervisor ignores it.

``GET /stats`` returns counters summed over all processes (whichever answers):
``received``; ``completed`` (a 200 body fully written, truncated ones included);
``failed`` (400, injected error, client gone); ``in_flight``/``peak_in_flight``
(handlers running, up to the last byte written); ``held`` (barrier waiters),
``released_waves``; ``generating``/``peak_generating``/``queued`` (latency
mode); ``stalled``, ``truncated``, ``errors_injected``, ``cancelled``,
``bad_requests``; ``bytes_out`` (200 body bytes); ``procs``, ``procs_ready``,
``mode`` and ``faults`` (seconds left per window). ``GET /health`` answers 200.
Every completions answer carries ``X-Router-Pid`` (the process that served it).

Two implementations, one behaviour: ``go/`` (the compiled router,
``faultload-router-<digest>``, built by ``faultload setup``) serves every
one-process config a trial's stack starts, at half the Python router's CPU per
completion alone and a quarter to a third less in a whole trial (README, "Benchmarks"); ``python -m faultload.router``
serves configs of several processes, and whatever a caller starts without the
binary (:func:`~faultload.router.handle.start_router`'s ``compiled``). The
router's tests run every behaviour on both. ``/stats`` as the handle returns it
names which one served (``impl``: ``compiled`` or ``python``).

Processes: with ``--procs 1`` the main process serves. With ``--procs N > 1``
the main process only supervises N forked workers that listen on the same port
with SO_REUSEPORT; counters, barrier state and fault windows live in shared
memory created before the fork, updated under one lock. ``READY <port>`` is
printed on stdout once every worker listens. The supervisor does not serve so
that :meth:`RouterHandle.crash` can SIGKILL the workers, let the supervisor reap
them, then kill it: orphans would stay zombies (PID 1 here reaps none).

Modules, one per role (only ``config`` is needed to describe a router, so it
and this package import nothing heavy: no httptools, numpy or psutil)
    ``config``       :class:`~faultload.model.router.RouterConfig` and the limits it checks.
    ``bodies``       request parsing and the response bodies.
    ``state``        cross-process shared counters, the barrier and the slot pool.
    ``completions``  the per-process completion log and its reader.
    ``http_server``  a minimal HTTP/1.1 server (asyncio + httptools): cheaper per
                     request and to import than aiohttp's (see its docstring).
    ``app``          the routes and the serving loop of one process.
    ``supervisor``   the CLI, the worker processes and their supervisor;
                     ``python -m faultload.router`` runs it.
    ``handle``       the parent side (:class:`~faultload.router.handle.RouterHandle`):
                     start, crash, restart, control, stats.
    ``compiled``     the compiled router's binary: its name (a digest of ``go/``),
                     finding it, building it.
    ``go/``          the compiled router's source (Go: net/http, fastjson): the
                     bodies, the modes and fault windows, the routes, for one process.
"""
