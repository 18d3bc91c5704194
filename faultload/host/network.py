"""Loopback networking: which ports are free and safe to listen on, and a bounded JSON GET.

The load workers open tens of thousands of client sockets; a listener inside
the ephemeral range could collide with (or be starved by) an outgoing
connection's local port. So faultload's listeners (proxies, the server under
test) use ports below the range, checked to bind right now.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import ssl
import time
from pathlib import Path
from urllib.parse import urlsplit

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_POOL = (20000, 32000)


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux default when unreadable)."""
    try:
        low, high = (int(x) for x in path.read_text().split()[:2])
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def port_pool(pool: tuple[int, int] = DEFAULT_POOL, ephemeral: tuple[int, int] | None = None) -> tuple[int, int]:
    """``pool`` clipped so it ends below the ephemeral range (inclusive bounds)."""
    low, high = pool
    eph_low, eph_high = ephemeral or ephemeral_range()
    if high >= eph_low and low <= eph_high:
        high = min(high, eph_low - 1)
    if high < low:
        raise RuntimeError(f"no ports in {pool} below the ephemeral range {eph_low}-{eph_high}")
    return low, high


def port_is_free(host: str, port: int) -> bool:
    """True when a listening socket can bind ``host:port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def pick_free_port(
    host: str = "127.0.0.1",
    rng: random.Random | None = None,
    exclude: set[int] | frozenset[int] = frozenset(),
    pool: tuple[int, int] = DEFAULT_POOL,
    attempts: int = 200,
) -> int:
    """A port below the ephemeral range that binds on ``host`` now.

    Random within the pool (``rng`` to seed it) so concurrent runs rarely race
    for the same port; a caller that then fails to listen should pick again.
    """
    low, high = port_pool(pool)
    rng = rng or random.Random()
    for _ in range(attempts):
        port = rng.randint(low, high)
        if port not in exclude and port_is_free(host, port):
            return port
    raise RuntimeError(f"no free port on {host} in {low}-{high} after {attempts} tries")


def http_get_json(url: str, timeout_s: float, tls: ssl.SSLContext | None = None) -> tuple[float, dict | None]:
    """GET ``url`` (https with ``tls``); (seconds taken, parsed JSON or None on any failure)."""
    parts = urlsplit(url)
    start = time.monotonic()
    conn = (
        http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout_s, context=tls)
        if parts.scheme == "https"
        else http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    )
    try:
        conn.request("GET", parts.path or "/")
        resp = conn.getresponse()
        body = resp.read()
        elapsed = time.monotonic() - start
        if resp.status != 200:
            return elapsed, None
        return elapsed, json.loads(body)
    except (OSError, http.client.HTTPException, ValueError):
        return time.monotonic() - start, None
    finally:
        conn.close()
