"""Server-side evidence the kernel keeps: fd counts and limits, accept queues, listen overflows.

Read per sample by the monitor (2 Hz), so each read must stay cheap while the
server holds thousands of sockets (costs measured with 4,000 connections and
8,000 fds open, ``bench/monitor_cpu.py``):

- open fds: ``stat("/proc/PID/fd").st_size`` is the count on Linux >= 6.2
  (3 µs); listing the directory, as ``psutil.num_fds`` does, took 7-8 ms at
  8,000 fds. Older kernels report 0 there, and then the directory is listed.
- the accept queue: one NETLINK_SOCK_DIAG dump of the listening TCP sockets
  (what ``ss -ltn`` asks the kernel), sent from this process: 0.025 ms, where
  running ``ss`` cost 0.7 ms here plus 6.5 ms in the child (CPU no report
  counted) and parsing /proc/net/tcp ~100 ms at tens of thousands of sockets.
  Written with ``struct`` rather than pyroute2: importing pyroute2 costs
  160-180 ms of CPU (``python -X importtime``), more than a short trial's
  samples would save.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ListenState:
    queued: int  # connections waiting in the accept queue (ss Recv-Q)
    backlog: int  # the queue's capacity (ss Send-Q), already capped by somaxconn


def fd_limits(pid: int) -> tuple[int, int] | None:
    """(soft, hard) RLIMIT_NOFILE of ``pid`` from /proc/PID/limits."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    except (OSError, ValueError):
        pass
    return None


def open_fds(pid: int) -> int | None:
    """How many fds ``pid`` has open, or None when it is gone or not ours to read.

    On Linux >= 6.2 the size of /proc/PID/fd is the count; before that it is 0
    (a live process always has some fds), and the directory is counted instead.
    """
    path = f"/proc/{pid}/fd"
    try:
        size = os.stat(path).st_size
        return size if size > 0 else len(os.listdir(path))
    except OSError:
        return None


# linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h
_NETLINK_SOCK_DIAG = 4  # the socket module does not name it
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST_DUMP = 0x1 | 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_TCP_LISTEN = 10
_NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, seq, pid
_DIAG_REQUEST = struct.Struct("=BBBxI48x")  # family, protocol, ext, states; the socket id (unused by a dump)
# struct inet_diag_msg: family, state, timer, retrans (u8 each); the socket id (sport and dport are
# big-endian u16 at 4 and 6, addresses, interface, cookie: 48 bytes); expires, rqueue, wqueue, uid, inode (u32).
_DIAG_STATE = struct.Struct("=xB")
_DIAG_SPORT = struct.Struct(">H")  # at 4
_DIAG_QUEUES = struct.Struct("=II")  # rqueue, wqueue at 56: for a listener, its accept queue and backlog
_DIAG_MESSAGE_SIZE = 72
_DUMP_LIMIT_BYTES = 1 << 22  # a dump of listeners only; bounded even on a host with thousands of them


def listen_state(port: int) -> ListenState | None:
    """The accept queue of the TCP listener on ``port`` (IPv4, then IPv6); None when unknown."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            found = _listener(family, port)
        except (OSError, AttributeError):  # AttributeError: no AF_NETLINK (not Linux)
            return None
        if found is not None:
            return found
    return None


def _listener(family: int, port: int) -> ListenState | None:
    request = _DIAG_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 1 << _TCP_LISTEN)
    header = _NLMSG_HEADER.pack(_NLMSG_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST_DUMP, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as sock:
        sock.settimeout(2.0)
        sock.sendto(header + request, (0, 0))
        found, received = None, 0
        while received < _DUMP_LIMIT_BYTES:
            data = sock.recv(1 << 16)
            received += len(data)
            offset = 0
            while offset + _NLMSG_HEADER.size <= len(data):
                length, kind = _NLMSG_HEADER.unpack_from(data, offset)[:2]
                if kind == _NLMSG_DONE:
                    return found
                if kind == _NLMSG_ERROR or length < _NLMSG_HEADER.size:
                    raise OSError("sock_diag dump refused")
                body = offset + _NLMSG_HEADER.size
                if kind == _SOCK_DIAG_BY_FAMILY and body + _DIAG_MESSAGE_SIZE <= len(data):
                    (state,) = _DIAG_STATE.unpack_from(data, body)
                    (sport,) = _DIAG_SPORT.unpack_from(data, body + 4)
                    if state == _TCP_LISTEN and sport == port:
                        queued, backlog = _DIAG_QUEUES.unpack_from(data, body + 56)
                        found = ListenState(queued=queued, backlog=backlog)
                offset += (length + 3) & ~3
        raise OSError("sock_diag dump did not end")


def listen_counters(path: Path = Path("/proc/net/netstat")) -> tuple[int, int] | None:
    """(ListenOverflows, ListenDrops) since boot, for this network namespace."""
    try:
        lines = [line.split() for line in path.read_text().splitlines() if line.startswith("TcpExt:")]
        names, values = lines[0], lines[1]
        table = dict(zip(names[1:], (int(v) for v in values[1:])))
        return table["ListenOverflows"], table["ListenDrops"]
    except (OSError, IndexError, KeyError, ValueError):
        return None
