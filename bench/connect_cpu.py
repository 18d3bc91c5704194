"""CPU per outgoing connect from a bound source address, as TIME_WAIT sockets pile up on it.

A benchmark, not a test. A load worker binds every connection to its own
127.x.y.z source address; a 4,096-request trial opens ~8,192 connections and
leaves them in TIME_WAIT for 60 s, so the next trial's connects meet a crowded
address. This measures, in one process, ``--rounds`` rounds of ``--per-round``
blocking connects to a local listener (closed by the client, so each leaves a
TIME_WAIT) for two ways of binding:

- ``bind0``: ``bind((ip, 0))`` then connect, what ``HttpPool`` did before:
  the kernel searches at bind time for a port no socket holds;
- ``no_port``: ``IP_BIND_ADDRESS_NO_PORT`` then ``bind((ip, 0))`` then
  connect, what ``HttpPool`` does now: the port is picked at connect time by
  the whole 4-tuple (and loopback's ``tcp_tw_reuse=2`` may reuse a TIME_WAIT).

Each way runs on a source address no earlier run of this script used (chosen
from the PID), ``no_port`` first: ports bound by ``bind0`` block connect-time
selection on every address, so the other order would measure that
interaction, not the method. CPU is this process's getrusage (user + system).

Usage: python bench/connect_cpu.py [--rounds 5] [--per-round 4096]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket

NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", None)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one_round(listener: socket.socket, source: str, count: int, no_port: bool) -> float:
    """CPU ms per connect over ``count`` connects from ``source``; every socket closed after."""
    clients, accepted = [], []
    start = _cpu()
    try:
        for i in range(count):
            sock = socket.socket()
            clients.append(sock)
            if no_port:
                sock.setsockopt(socket.IPPROTO_IP, NO_PORT, 1)
            sock.bind((source, 0))
            sock.connect(listener.getsockname())
            if i % 256 == 255:  # keep the accept queue short
                accepted += [listener.accept()[0] for _ in range(256)]
        spent = _cpu() - start
    finally:
        for sock in clients + accepted:  # the client's close first: the TIME_WAIT is on the client side
            sock.close()
    return spent / count * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=4096)
    args = parser.parse_args()
    if NO_PORT is None:
        print("IP_BIND_ADDRESS_NO_PORT is Linux-only; nothing to compare here")
        return 2
    base = 2 + os.getpid() % 200
    sources = {"no_port": f"127.0.{base}.11", "bind0": f"127.0.{base}.12"}
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    table: dict[str, list[float]] = {}
    with listener:
        for way in ("no_port", "bind0"):
            table[way] = [
                one_round(listener, sources[way], args.per_round, way == "no_port") for _ in range(args.rounds)
            ]
    print(f"{'round':<8}{'TIME_WAIT before':>18}{'no_port ms':>12}{'bind0 ms':>12}{'bind0/no_port':>15}")
    for i in range(args.rounds):
        a, b = table["no_port"][i], table["bind0"][i]
        print(f"{i + 1:<8}{i * args.per_round:>18}{a:>12.3f}{b:>12.3f}{b / a:>14.1f}x")
    # The cost grows with the crowd, so a median over rounds hides it: the last round is the figure.
    print(
        f"last round (a crowded address): bind0 costs x{table['bind0'][-1] / table['no_port'][-1]:.0f} no_port's CPU per connect"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
