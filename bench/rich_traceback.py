"""Event-loop time SkyRL spends logging one failed forward, Rich tracebacks against plain ones, side by side.

SkyRL logs each failed forward with ``logger.exception`` through its
``RichHandler(rich_tracebacks=True)`` (``skyrl.utils.log``), on the API
server's only event loop. This times that call in isolation: a real aiohttp
connect failure (to a closed loopback port), logged through SkyRL's own
``skyrl`` logger, alternating the handler's ``rich_tracebacks`` on and off
record by record, output to a temp file as a server's stderr would be. It
prints the median seconds per record for each and their ratio; the machine is
shared and noisy, so read the medians.

Must run under a SkyRL target's Python (it imports ``skyrl``)::

    .faultload/targets/skyrl-0.4.0/bin/python bench/rich_traceback.py [--records N]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import statistics
import tempfile
import time


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def failed_forward(url: str) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.post(url, json={}) as response:
            await response.read()


async def measure(records: int) -> dict[bool, list[float]]:
    from skyrl.utils.log import logger

    handler = logging.getLogger("skyrl").handlers[0]
    url = f"http://127.0.0.1:{closed_port()}/v1/completions"
    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryFile("w") as sink:
        handler.console.file = sink
        for i in range(2 * records):
            rich = i % 2 == 0
            handler.rich_tracebacks = rich
            try:
                await failed_forward(url)
            except Exception:
                started = time.perf_counter()
                logger.exception("Backend-forwarded sample failed (request_id=%s)", i)
                times[rich].append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20, help="records per mode (default 20)")
    args = parser.parse_args()
    if not 1 <= args.records <= 1000:
        parser.error("--records must be in [1, 1000]")
    times = asyncio.run(measure(args.records))
    rich, plain = statistics.median(times[True]), statistics.median(times[False])
    print(f"records per mode: {args.records}")
    print(f"rich_tracebacks=True   median {rich * 1000:8.1f} ms per record (max {max(times[True]) * 1000:.1f})")
    print(f"rich_tracebacks=False  median {plain * 1000:8.1f} ms per record (max {max(times[False]) * 1000:.1f})")
    print(f"ratio rich/plain: {rich / plain:.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
