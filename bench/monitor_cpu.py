"""CPU per monitor sample of the server's fds and accept queue: the old reads against the new.

A benchmark, not a test. The monitor samples at 2 Hz for the whole trial (the
131k confirmation: ~1,000 samples) while the server holds thousands of
sockets, so what one read costs is paid a thousand times. This process opens
``--connections`` loopback connections to a listener of its own (two fds
each, like a busy server) and times, alternating, ``--calls`` calls of:

- fd count: ``psutil.Process.num_fds`` (lists /proc/PID/fd) vs
  ``faultload.run.kernel.open_fds`` (the directory's st_size on Linux >= 6.2);
- accept queue: running ``ss -Hltn sport = :PORT`` as the monitor did (this
  process's CPU, and the child's, which no report counted) vs
  ``faultload.run.kernel.listen_state`` (one sock_diag dump from this process).

CPU is getrusage (RUSAGE_SELF, and RUSAGE_CHILDREN for ``ss``).

Usage: .faultload/venv/bin/python bench/monitor_cpu.py [--connections 4000] [--calls 200]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import subprocess

import psutil

from faultload.run import kernel


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def per_call_ms(call, calls: int, who: int = resource.RUSAGE_SELF) -> float:
    start = _cpu(who)
    for _ in range(calls):
        call()
    return (_cpu(who) - start) / calls * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=4000)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    port = listener.getsockname()[1]
    held = []
    for i in range(args.connections):
        held.append(socket.create_connection(("127.0.0.1", port)))
        if i % 256 == 255 or i == args.connections - 1:
            while len(held) < 2 * (i + 1):
                held.append(listener.accept()[0])
    pid, proc, ss = os.getpid(), psutil.Process(), shutil.which("ss")
    print(f"{kernel.open_fds(pid)} fds open, {args.connections} connections; CPU ms per call, {args.calls} calls each")
    print(f"{'read':<44}{'old':>10}{'new':>10}{'old/new':>10}")
    old = per_call_ms(proc.num_fds, args.calls)
    new = per_call_ms(lambda: kernel.open_fds(pid), args.calls)
    print(f"{'fd count: psutil.num_fds / kernel.open_fds':<44}{old:>10.3f}{new:>10.4f}{old / new:>9.0f}x")
    if ss is None:
        print("accept queue: no `ss` here to compare with")
        return 0
    command = [ss, "-Hltn", f"sport = :{port}"]
    run_ss = lambda: subprocess.run(command, capture_output=True, text=True, timeout=2.0, check=False)  # noqa: E731
    old_self = per_call_ms(run_ss, args.calls)
    old_child = per_call_ms(run_ss, args.calls, resource.RUSAGE_CHILDREN)  # a second batch: the children's share
    new = per_call_ms(lambda: kernel.listen_state(port), args.calls)
    print(f"{'accept queue: ss (self) / listen_state':<44}{old_self:>10.3f}{new:>10.4f}{old_self / new:>9.0f}x")
    print(
        f"{'accept queue: ss (self + child) / listen_state':<44}{old_self + old_child:>10.3f}{new:>10.4f}"
        f"{(old_self + old_child) / new:>9.0f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
