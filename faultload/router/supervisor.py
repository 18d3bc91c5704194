"""The router's processes: the CLI (``python -m faultload.router``), its workers and their supervisor.

With ``--procs 1`` the main process serves; with more it only supervises
forked workers on one SO_REUSEPORT port (see :mod:`faultload.router`,
"Processes", for why the supervisor does not serve).
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing as mp
import multiprocessing.connection
import resource
import signal
import socket
import sys
import time
from typing import Any

from faultload.host import eventloop
from faultload.model.router import CLOSE_IDLE_SIGNAL, MODES, SHUTDOWN_S, RouterConfig
from faultload.router.app import serve
from faultload.router.bodies import completion_body
from faultload.router.state import INT_INDEX, SharedState


def raise_nofile_limit() -> None:
    """Soft RLIMIT_NOFILE to the hard limit: one process may hold ~10k connections."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _bind_socket(host: str, port: int, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def _set_parent_death_signal() -> None:
    """Workers get SIGTERM when the supervisor dies, so none outlives it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _worker_main(
    config: RouterConfig,
    shared: SharedState,
    host: str,
    port: int,
    reservation: socket.socket,
    completions_dir: str | None = None,
) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _set_parent_death_signal()
    reservation.close()
    raise_nofile_limit()
    sock = _bind_socket(host, port, reuse_port=True)
    eventloop.run(serve(config, shared, sock, lambda: shared.add("procs_ready", 1), completions_dir))


def _announce(port: int) -> None:
    sys.stdout.write(f"READY {port}\n")
    sys.stdout.flush()


def _supervise(
    config: RouterConfig, shared: SharedState, host: str, port: int, completions_dir: str | None = None
) -> int:
    """Fork ``config.procs`` workers on one SO_REUSEPORT port; reap them; stop them on a signal."""
    stopping = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    reservation = _bind_socket(host, port, reuse_port=True)  # holds the port; never listens
    port = reservation.getsockname()[1]
    ctx = mp.get_context("fork")
    workers = [
        ctx.Process(
            target=_worker_main, args=(config, shared, host, port, reservation, completions_dir), name=f"router-{i}"
        )
        for i in range(config.procs)
    ]
    for w in workers:
        w.start()
    try:
        if not _wait_workers_ready(shared, workers, lambda: stopping):
            return 1
        reservation.close()
        _announce(port)
        while not stopping and any(w.is_alive() for w in workers):
            mp.connection.wait([w.sentinel for w in workers if w.is_alive()], timeout=0.2)
        return 0 if stopping else 1
    finally:
        reservation.close()
        _stop_workers(workers)


def _wait_workers_ready(shared: SharedState, workers: list[Any], stopping: Any) -> bool:
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline and not stopping():
        if shared.ints[INT_INDEX["procs_ready"]] >= len(workers):
            return True
        dead = [w for w in workers if not w.is_alive()]
        if dead:
            print(f"faultload.router: worker {dead[0].name} exited with {dead[0].exitcode}", file=sys.stderr)
            return False
        time.sleep(0.01)
    print("faultload.router: workers did not become ready", file=sys.stderr)
    return False


def _stop_workers(workers: list[Any]) -> None:
    for w in workers:
        if w.is_alive():
            w.terminate()
    deadline = time.monotonic() + SHUTDOWN_S + 3.0
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    for w in workers:
        if w.is_alive():
            w.kill()
            w.join(2.0)


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        sys.stderr.write(f"faultload.router: error: {message}\n")
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="python -m faultload.router", description="Fake vLLM router for faultload.")
    d = RouterConfig()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--mode", default=d.mode, choices=MODES)
    p.add_argument("--barrier", type=int, default=d.barrier, help="wave size in barrier mode")
    p.add_argument("--barrier-timeout", type=float, default=d.barrier_timeout_s, help="seconds")
    p.add_argument("--max-num-seqs", type=int, default=d.max_num_seqs)
    p.add_argument("--gen-seconds", type=float, default=d.gen_seconds)
    p.add_argument("--procs", type=int, default=d.procs)
    p.add_argument(
        "--completions-dir",
        default=None,
        metavar="DIR",
        help="append (nonce, time) of every completion to DIR/completions-PID.bin",
    )
    p.add_argument("--bench", type=int, metavar="T", help="time body building for max_tokens=T and exit")
    return p


def _bench(max_tokens: int) -> int:
    completion_body(1, 1, 16)  # build the tables
    reps = 5
    t0 = time.perf_counter()
    for i in range(reps):
        body = completion_body(i, 1, max_tokens)
    dt = (time.perf_counter() - t0) / reps
    print(f"T={max_tokens}: {len(body)} bytes in {dt * 1e3:.1f} ms = {len(body) / dt / 1e6:.0f} MB/s")
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI entry: serve until SIGTERM/SIGINT; exit 2 on bad flags."""
    args = _parser().parse_args(argv)
    if args.bench is not None:
        return _bench(args.bench)
    config = RouterConfig(
        mode=args.mode,
        barrier=args.barrier,
        barrier_timeout_s=args.barrier_timeout,
        max_num_seqs=args.max_num_seqs,
        gen_seconds=args.gen_seconds,
        procs=args.procs,
    )
    try:
        config.validate()
        if not 0 <= args.port <= 65535:
            raise ValueError(f"--port: must be in [0, 65535] (got {args.port})")
    except ValueError as e:
        sys.stderr.write(f"faultload.router: error: {e}\n")
        return 2
    raise_nofile_limit()
    # Ignored until a serving loop installs its handler (one sent before that has nothing to close);
    # the supervisor keeps ignoring it, and its forked workers inherit the ignore.
    signal.signal(CLOSE_IDLE_SIGNAL, signal.SIG_IGN)
    shared = SharedState()
    try:
        if config.procs > 1:
            return _supervise(config, shared, args.host, args.port, args.completions_dir)
        sock = _bind_socket(args.host, args.port, reuse_port=False)
        port = sock.getsockname()[1]

        def on_ready() -> None:
            shared.add("procs_ready", 1)
            _announce(port)

        eventloop.run(serve(config, shared, sock, on_ready, args.completions_dir))
        return 0
    except OSError as e:
        sys.stderr.write(f"faultload.router: error: cannot serve on {args.host}:{args.port}: {e}\n")
        return 1
