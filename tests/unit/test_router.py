"""The fake vLLM router: bodies, modes, faults, multi-process state, lifecycle.

Every wait is bounded; nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import psutil
import pytest
import simdjson
from conftest import require_compiled_router

from faultload.model import tokens
from faultload.model.router import RouterConfig
from faultload.router.bodies import completion_body
from faultload.router.handle import RouterHandle, start_router

WAIT_S = 10.0  # upper bound for any wait in these tests


# --------------------------------------------------------------------------- helpers


def payload(nonce: int, n: int = 1, max_tokens: int = 8, **extra: Any) -> dict[str, Any]:
    return {
        "model": "base",
        "prompt": tokens.prompt_tokens(nonce),
        "n": n,
        "seed": 0,
        "max_tokens": max_tokens,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "logprobs": 1,
        "stream": False,
        "return_token_ids": True,
        **extra,
    }


async def post(url: str, body: dict[str, Any], session: aiohttp.ClientSession | None = None) -> tuple[int, bytes, Any]:
    """POST /v1/completions on a fresh connection unless a session is given."""
    own = session is None
    session = session or aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True))
    try:
        timeout = aiohttp.ClientTimeout(total=60)
        async with session.post(f"{url}/v1/completions", json=body, timeout=timeout) as resp:
            return resp.status, await resp.read(), resp.headers
    finally:
        if own:
            await session.close()


def wait_until(cond: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def settled(h: RouterHandle) -> dict:
    """The router's counts once every request has departed: it writes an answer before it counts it (``in_flight``
    covers up to the last byte written), so a client that has every answer can still read the counts between."""
    wait_until(lambda: h.stats()["in_flight"] == 0, "every request to depart")
    return h.stats()


def check_body(body: bytes, nonce: int, n: int, max_tokens: int) -> None:
    """Both JSON parsers the servers use see exactly the tokens module's arrays, each choice as
    ``tokens.choice`` shapes it: its length, finish reason, and logprobs or null."""
    for doc in (json.loads(body), simdjson.loads(body)):
        assert doc["object"] == "text_completion"
        assert len(doc["choices"]) == n
        for j, choice in enumerate(doc["choices"]):
            shape = tokens.choice(nonce, j, max_tokens)
            assert choice["index"] == j
            assert choice["finish_reason"] == ("stop" if shape.stopped else "length")
            np.testing.assert_array_equal(
                np.asarray(choice["token_ids"], dtype=np.int64), tokens.output_tokens(nonce, j, shape.length)
            )
            if not shape.has_logprobs:
                assert choice["logprobs"] is None
                continue
            lp = np.asarray(choice["logprobs"]["token_logprobs"], dtype=np.float64)
            np.testing.assert_array_equal(lp.astype(np.float32), tokens.output_logprobs(nonce, j, shape.length))
            np.testing.assert_array_equal(lp, -tokens.logprob_digits(nonce, j, shape.length) / tokens.LOGPROB_SCALE)
        completion = sum(tokens.choice(nonce, j, max_tokens).length for j in range(n))
        assert doc["usage"]["completion_tokens"] == completion


def compiled_router() -> Path:
    """The compiled router setup built for this source (conftest's one policy: make test fails without it)."""
    return require_compiled_router()


@pytest.fixture(params=["compiled", "python"])
def router(request: pytest.FixtureRequest) -> Iterator[Callable[..., RouterHandle]]:
    """Factory for routers that are always stopped at the end of the test: each test runs on the compiled
    router and on the Python one (a config of several processes is always the Python one's)."""
    handles: list[RouterHandle] = []
    compiled = compiled_router() if request.param == "compiled" else None

    def make(**kw: Any) -> RouterHandle:
        h = start_router(RouterConfig(**kw), compiled=compiled)
        assert h.impl == ("python" if compiled is None or h.config.procs > 1 else "compiled")
        handles.append(h)
        return h

    yield make
    for h in handles:
        h.stop()


# --------------------------------------------------------------------------- config and CLI


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"mode": "fast"}, "mode"),
        ({"mode": "barrier", "barrier": 0}, "barrier"),
        ({"barrier": -1}, "barrier"),
        ({"barrier_timeout_s": 0.0}, "barrier_timeout_s"),
        ({"barrier_timeout_s": float("nan")}, "barrier_timeout_s"),
        ({"max_num_seqs": 0}, "max_num_seqs"),
        ({"gen_seconds": -0.1}, "gen_seconds"),
        ({"procs": 0}, "procs"),
        ({"procs": 2.0}, "procs"),
    ],
)
def test_config_validation_names_the_field(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError) as e:
        RouterConfig(**kw).validate()
    assert f"RouterConfig.{field}:" in str(e.value)
    assert "\n" not in str(e.value)


def test_default_config_is_valid_and_round_trips() -> None:
    from dataclasses import asdict

    cfg = RouterConfig(mode="barrier", barrier=4)
    cfg.validate()
    assert RouterConfig(**json.loads(json.dumps(asdict(cfg)))) == cfg


def test_config_module_imports_nothing_heavy() -> None:
    """The parent builds a RouterConfig without loading the router's machinery."""
    code = "import sys, faultload.model.router; print(sorted({'aiohttp', 'numpy'} & set(sys.modules)))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30, check=True)
    assert r.stdout.decode().strip() == "[]", r.stdout


@pytest.mark.parametrize("impl", ["compiled", "python"])
def test_cli_bad_flag_exits_2_with_one_line(impl: str) -> None:
    program = [str(compiled_router())] if impl == "compiled" else [sys.executable, "-m", "faultload.router"]
    bad = [["--mode", "nope"], ["--procs", "0"], ["--mode", "barrier"], ["--port", "70000"], ["--gen-seconds", "x"]]
    if impl == "compiled":
        bad.append(["--procs", "2"])  # several processes are the Python router's
    for argv in bad:
        r = subprocess.run([*program, *argv], capture_output=True, timeout=30)
        assert r.returncode == 2, argv
        assert len(r.stderr.decode().strip().splitlines()) == 1, r.stderr


# --------------------------------------------------------------------------- bodies


@pytest.mark.parametrize("n, max_tokens", [(1, 1), (2, 37), (2, 200_000)])
def test_body_decodes_to_the_tokens_module_arrays(n: int, max_tokens: int) -> None:
    nonce = 123_456_789_012
    check_body(completion_body(nonce, n, max_tokens, "m", tokens.prompt_tokens(nonce)), nonce, n, max_tokens)


def test_body_extreme_values_and_prompt_logprobs() -> None:
    # Find sample positions that hit token 0 / 49999 and digit 0 / 9999 somewhere.
    body = completion_body(7, 1, 60_000, 'a "quoted" model', tokens.prompt_tokens(7, extra=2), prompt_logprobs=0)
    doc = json.loads(body)
    ids = np.asarray(doc["choices"][0]["token_ids"])
    assert ids.min() == 0 and ids.max() == tokens.VOCAB - 1
    assert doc["model"] == 'a "quoted" model'
    plp = doc["choices"][0]["prompt_logprobs"]
    assert plp[0] is None and len(plp) == 5
    assert all(str(tid) in entry for tid, entry in zip(tokens.prompt_tokens(7, extra=2)[1:], plp[1:]))
    completion = tokens.choice(7, 0, 60_000).length
    assert doc["usage"] == {"prompt_tokens": 5, "total_tokens": 5 + completion, "completion_tokens": completion}


def test_served_bodies_are_exact_and_foreign_prompts_get_400(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="immediate")

    async def run() -> None:
        for nonce, n, t in ((1, 1, 5), (2**40 - 1, 2, 200_000)):
            status, body, headers = await post(h.url, payload(nonce, n, t))
            assert status == 200
            assert int(headers["Content-Length"]) == len(body)
            check_body(body, nonce, n, t)
        bad = payload(5)
        bad["prompt"] = [1, 2, 3, 4]
        status, body, _ = await post(h.url, bad)
        assert status == 400 and json.loads(body)["code"] == 400
        status, _, _ = await post(h.url, payload(5, max_tokens=0))
        assert status == 400

    asyncio.run(run())
    s = settled(h)
    assert (s["received"], s["completed"], s["failed"], s["bad_requests"]) == (4, 2, 2, 2)
    assert s["in_flight"] == 0 and s["bytes_out"] > 2 * 200_000 * 14


# --------------------------------------------------------------------------- barrier


def test_barrier_holds_until_the_nth_request(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="barrier", barrier=4, barrier_timeout_s=60.0)

    async def run() -> None:
        held = [asyncio.create_task(post(h.url, payload(i))) for i in range(3)]
        await asyncio.to_thread(wait_until, lambda: h.stats()["held"] == 3, "3 held")
        await asyncio.sleep(0.3)
        s = await asyncio.to_thread(h.stats)
        assert s["completed"] == 0 and s["held"] == 3 and s["released_waves"] == 0
        assert not any(t.done() for t in held)
        last = await asyncio.wait_for(post(h.url, payload(3)), WAIT_S)
        results = await asyncio.wait_for(asyncio.gather(*held), WAIT_S)
        for i, (status, body, _) in enumerate([*results, last]):
            assert status == 200
            check_body(body, i, 1, 8)

    asyncio.run(run())
    s = settled(h)
    assert (s["completed"], s["held"], s["released_waves"], s["peak_in_flight"]) == (4, 0, 1, 4)


def _keepalive_sockets(h: RouterHandle, count: int, held: int = 0) -> list[socket.socket]:
    """``count`` connections that each got an answer and stay open (keep-alive), plus ``held`` whose
    request the router is holding (barrier mode)."""

    def send(i: int) -> socket.socket:
        s = socket.create_connection((h.host, h.port), timeout=WAIT_S)
        body = json.dumps(payload(i)).encode()
        s.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        return s

    # The answered ones first, then the held ones: which requests of those sent at once make up a wave is not
    # specified (the compiled router serves each connection on its own goroutine, in no set order).
    socks = [send(i) for i in range(count)]
    for s in socks:
        data = b""
        while b"\r\n\r\n" not in data:
            data += s.recv(65536)
        assert data.startswith(b"HTTP/1.1 200")
    return socks + [send(count + i) for i in range(held)]


def _closed_by_peer(s: socket.socket, wait_s: float) -> bool:
    """Whether the router closed ``s`` within ``wait_s`` (EOF after any rest of the answer)."""
    s.settimeout(wait_s)
    try:
        while s.recv(65536):
            pass
        return True
    except (TimeoutError, socket.timeout):
        return False
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("router, procs", [("compiled", 1), ("python", 1), ("python", 2)], indirect=["router"])
def test_close_idle_closes_keepalive_connections(router: Callable[..., RouterHandle], procs: int) -> None:
    h = router(procs=procs)
    socks = _keepalive_sockets(h, 6)
    try:
        assert not any(_closed_by_peer(s, 0.2) for s in socks)  # keep-alive: open after their answers
        h.close_idle()
        assert all(_closed_by_peer(s, WAIT_S) for s in socks)
        assert h.stats()["completed"] == 6  # still serving
    finally:
        for s in socks:
            s.close()


@pytest.mark.parametrize("router, procs", [("compiled", 1), ("python", 1), ("python", 2)], indirect=["router"])
def test_close_idle_leaves_a_connection_just_accepted_to_send_its_request(
    router: Callable[..., RouterHandle], procs: int
) -> None:
    """A trial's ``/stats`` call right after ``close_idle`` was cut before its request was read ("Remote end
    closed connection without response", a harness error): a connection with no request yet is not idle."""
    h = router(procs=procs)
    kept = _keepalive_sockets(h, 2)
    fresh = socket.create_connection((h.host, h.port), timeout=WAIT_S)
    try:
        wait_until(lambda: h.stats()["completed"] == 2, "2 completed")
        h.close_idle()
        assert all(_closed_by_peer(s, WAIT_S) for s in kept)  # the signal was handled
        fresh.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = fresh.recv(65536)
            assert chunk, "the router closed a connection that had not sent its request yet"
            data += chunk
        assert data.startswith(b"HTTP/1.1 200")
    finally:
        for s in [*kept, fresh]:
            s.close()


def test_close_idle_closes_nothing_while_a_completion_is_in_flight(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="barrier", barrier=2, barrier_timeout_s=60.0)
    socks = _keepalive_sockets(h, 2, held=1)  # a wave of 2 answered, the third held for the next wave
    try:
        wait_until(lambda: h.stats()["held"] == 1, "1 held")
        h.close_idle()
        assert not any(_closed_by_peer(s, 0.5) for s in socks)  # a forward may be about to reuse one
        assert h.stats()["in_flight"] == 1
    finally:
        for s in socks:
            s.close()


def test_barrier_timeout_releases_a_partial_wave(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="barrier", barrier=100, barrier_timeout_s=0.3)

    async def run() -> list[int]:
        results = await asyncio.wait_for(asyncio.gather(*(post(h.url, payload(i)) for i in range(3))), WAIT_S)
        return [status for status, _, _ in results]

    assert asyncio.run(run()) == [200, 200, 200]
    s = settled(h)
    assert (s["completed"], s["held"], s["released_waves"]) == (3, 0, 1)


def test_barrier_waiter_that_disconnects_leaves_the_wave(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="barrier", barrier=3, barrier_timeout_s=60.0)

    async def run() -> None:
        tasks = [asyncio.create_task(post(h.url, payload(i))) for i in range(2)]
        await asyncio.to_thread(wait_until, lambda: h.stats()["held"] == 2, "2 held")
        tasks[0].cancel()
        await asyncio.to_thread(wait_until, lambda: h.stats()["held"] == 1, "1 held after disconnect")
        assert not tasks[1].done()
        tasks[1].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())
    wait_until(lambda: h.stats()["in_flight"] == 0, "handlers to finish")
    s = h.stats()
    assert s["cancelled"] == 2 and s["held"] == 0 and s["completed"] == 0 and s["released_waves"] == 0


# --------------------------------------------------------------------------- latency


def test_latency_mode_caps_concurrent_generation(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="latency", max_num_seqs=2, gen_seconds=0.05)

    async def run() -> None:
        results = await asyncio.wait_for(asyncio.gather(*(post(h.url, payload(i)) for i in range(10))), WAIT_S)
        for i, (status, body, _) in enumerate(results):
            assert status == 200
            check_body(body, i, 1, 8)

    asyncio.run(run())
    s = settled(h)
    assert s["peak_generating"] == 2  # 10 concurrent requests fill both slots, never more
    assert s["peak_in_flight"] > 2  # the rest were queued, not refused
    assert (s["completed"], s["generating"], s["queued"]) == (10, 0, 0)


# --------------------------------------------------------------------------- several processes


@pytest.mark.parametrize("router", ["python"], indirect=True)
def test_two_procs_share_stats(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="immediate", procs=2)
    assert len(h.pids()) == 3  # supervisor + 2 workers

    async def run() -> set[str]:
        results = await asyncio.gather(*(post(h.url, payload(i)) for i in range(40)))
        assert all(status == 200 for status, _, _ in results)
        return {headers["X-Router-Pid"] for _, _, headers in results}

    served_by = asyncio.run(run())
    assert len(served_by) == 2  # SO_REUSEPORT spread 40 fresh connections
    settled(h)
    for _ in range(6):  # each /stats is a fresh connection, answered by either worker
        s = h.stats()
        assert (s["received"], s["completed"], s["procs"], s["procs_ready"]) == (40, 40, 2, 2)


@pytest.mark.parametrize("router", ["python"], indirect=True)
def test_barrier_across_procs(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="barrier", barrier=16, barrier_timeout_s=60.0, procs=2)

    async def run() -> set[str]:
        held = [asyncio.create_task(post(h.url, payload(i))) for i in range(15)]
        await asyncio.to_thread(wait_until, lambda: h.stats()["held"] == 15, "15 held")
        await asyncio.sleep(0.2)
        assert h.stats()["completed"] == 0 and not any(t.done() for t in held)
        last = await asyncio.wait_for(post(h.url, payload(15)), WAIT_S)
        results = [*await asyncio.wait_for(asyncio.gather(*held), WAIT_S), last]
        assert all(status == 200 for status, _, _ in results)
        return {headers["X-Router-Pid"] for _, _, headers in results}

    assert len(asyncio.run(run())) == 2  # the wave really spanned both processes
    s = settled(h)
    assert (s["completed"], s["held"], s["released_waves"]) == (16, 0, 1)


# --------------------------------------------------------------------------- faults


def test_errors_window_then_normal(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="immediate")

    async def run() -> None:
        h.timed_fault("errors", 60.0, 502)
        status, body, _ = await post(h.url, payload(1))
        assert status == 502 and json.loads(body)["code"] == 502
        h.reset_faults()
        status, body, _ = await post(h.url, payload(1))
        assert status == 200
        h.timed_fault("errors", 0.3)  # expires on its own
        assert (await post(h.url, payload(2)))[0] == 503
        deadline = time.monotonic() + WAIT_S
        while (await post(h.url, payload(2)))[0] != 200 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert (await post(h.url, payload(2)))[0] == 200

    asyncio.run(run())
    assert h.stats()["errors_injected"] >= 2


def test_stall_holds_answers_until_it_ends(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="immediate")

    async def run() -> None:
        h.timed_fault("stall", 60.0)
        task = asyncio.create_task(post(h.url, payload(3)))
        await asyncio.to_thread(wait_until, lambda: h.stats()["stalled"] == 1, "stalled request")
        await asyncio.sleep(0.2)
        assert not task.done() and h.stats()["completed"] == 0
        h.reset_faults()
        status, body, _ = await asyncio.wait_for(task, WAIT_S)
        assert status == 200
        check_body(body, 3, 1, 8)
        h.timed_fault("stall", 0.3)  # expires on its own
        status, body, _ = await asyncio.wait_for(post(h.url, payload(4)), WAIT_S)
        assert status == 200

    asyncio.run(run())
    s = settled(h)
    assert (s["completed"], s["stalled"]) == (2, 0)


def test_a_stall_holds_many_requests_and_its_end_answers_them_all(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="immediate")

    async def run() -> None:
        h.timed_fault("stall", 60.0)
        tasks = [asyncio.create_task(post(h.url, payload(i))) for i in range(40)]
        await asyncio.to_thread(wait_until, lambda: h.stats()["stalled"] == 40, "40 stalled requests")
        h.timed_fault("stall", 60.0)  # a new call replaces the window: the held requests stay held
        await asyncio.sleep(0.1)
        assert not any(t.done() for t in tasks)
        h.reset_faults()
        results = await asyncio.wait_for(asyncio.gather(*tasks), WAIT_S)
        for i, (status, body, _) in enumerate(results):
            assert status == 200
            check_body(body, i, 1, 8)

    asyncio.run(run())
    s = settled(h)
    assert (s["completed"], s["stalled"], s["in_flight"]) == (40, 0, 0)


def test_truncate_cuts_the_body_in_half(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="immediate")
    full = completion_body(9, 2, 100, "base", tokens.prompt_tokens(9))

    async def run() -> None:
        h.timed_fault("truncate", 60.0)
        status, body, headers = await post(h.url, payload(9, n=2, max_tokens=100))
        assert status == 200
        assert body == full[: len(full) // 2] and int(headers["Content-Length"]) == len(body)
        with pytest.raises(ValueError):
            json.loads(body)
        h.reset_faults()
        status, body, _ = await post(h.url, payload(9, n=2, max_tokens=100))
        assert status == 200 and body == full

    asyncio.run(run())
    assert h.stats()["truncated"] == 1


def test_a_fault_window_ends_at_its_deadline_however_late_its_call_arrives(router: Callable[..., RouterHandle]) -> None:
    """A truncate sent to a paused router is applied when it resumes: it must end when it was meant to."""
    h = router(mode="immediate")
    h._control("/control/truncate", {"seconds": 60.0, "until_monotonic": time.monotonic() - 1.0})
    assert h.stats()["faults"]["truncate_s"] == 0.0  # past its deadline: nothing
    h._control("/control/stall", {"seconds": 60.0, "until_monotonic": time.monotonic() + 30.0})
    assert 0.0 < h.stats()["faults"]["stall_s"] <= 30.0
    h.reset_faults()
    h.pause(30.0)
    deadline = time.monotonic() + 0.2  # fixed here, so however late the thread runs its call ends by then
    late = threading.Thread(
        target=h._control, args=("/control/truncate", {"seconds": 0.2, "until_monotonic": deadline})
    )
    late.start()  # waits in the paused router's socket
    while time.monotonic() <= deadline:  # resume only once the deadline has passed (bounded: 0.2 s)
        time.sleep(0.01)
    h.resume()
    late.join(10.0)
    assert not late.is_alive() and h.stats()["faults"]["truncate_s"] == 0.0
    with pytest.raises(RuntimeError, match="400"):
        h._control("/control/truncate", {"seconds": 1.0, "until_monotonic": "soon"})


def test_control_rejects_bad_input(router: Callable[..., RouterHandle]) -> None:
    h = router(mode="immediate")
    with pytest.raises(RuntimeError, match="400"):
        h.timed_fault("errors", 1.0, 200)
    with pytest.raises(RuntimeError, match="400"):
        h.timed_fault("stall", -1.0)
    assert h._request("POST", "/control/meteor", {})[0] == 404


def _runs(pid: int) -> bool:
    """``pid`` is a process that has not exited (a zombie has)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("router, procs", [("compiled", 1), ("python", 1), ("python", 2)], indirect=["router"])
def test_crash_refuses_connections_and_restart_serves(router: Callable[..., RouterHandle], procs: int) -> None:
    h = router(mode="immediate", procs=procs)
    url, before = h.url, h.pids()
    h.crash()
    # gone when crash() returns: exited, or a zombie its new parent has not reaped yet (a zombie holds no socket;
    # the supervisor's workers are reparented when it dies, and reaped a moment later)
    assert not [p for p in before if _runs(p)]

    async def refused() -> None:
        with pytest.raises(aiohttp.ClientConnectorError):
            await post(url, payload(1))

    asyncio.run(refused())
    h.restart()
    assert h.url == url and h.stats()["received"] == 0
    status, body, _ = asyncio.run(post(url, payload(1)))
    assert status == 200
    check_body(body, 1, 1, 8)


# --------------------------------------------------------------------------- lifecycle


def test_stop_leaves_no_process() -> None:
    with start_router(RouterConfig(mode="immediate", procs=2)) as h:
        pids = h.pids()
        assert len(pids) == 3 and all(psutil.pid_exists(p) for p in pids)
    wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), "router processes to vanish", 2.0)
    h.stop()  # idempotent


def _router_children() -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if p.is_running()
        and p.status() != psutil.STATUS_ZOMBIE
        and any(name in " ".join(p.cmdline()) for name in ("faultload.router", "faultload-router"))
    ]


@pytest.mark.parametrize("impl", ["compiled", "python"])
def test_start_failure_raises_and_leaves_no_process(impl: str) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    compiled = compiled_router() if impl == "compiled" else None
    try:
        with pytest.raises(RuntimeError, match="router failed to start: .*cannot serve"):
            start_router(
                RouterConfig(mode="immediate"), port=blocker.getsockname()[1], ready_timeout_s=10.0, compiled=compiled
            )
    finally:
        blocker.close()
    assert _router_children() == []
