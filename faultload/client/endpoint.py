"""Where a load worker's HTTP goes and how: the server's base URL split, the headers every POST carries, the
keep-alive pool bound to the worker's address (TLS for https), and what a transport error is called.

Shared by the raw sampling client (``raw.py``) and the training client (``training.py``).
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from faultload.client.http import ConnectError, HttpPool, HttpTimeout, ProtocolError, ResetError
from faultload.client.job import WorkerJob
from faultload.model.access import tls_for
from faultload.record.history import ErrorClass


# As the SDK: every call carries its API key (a server that checks keys authorizes faultload's).
def json_headers(job: WorkerJob) -> bytes:
    """A JSON POST's headers: its content type, the server's key and the extra headers (``job.access``)."""
    return b"Content-Type: application/json\r\n" + job.access.header_block()


def classify_error(exc: BaseException) -> ErrorClass:
    # Timeouts first: a connect timeout (ConnectTimeout is a ConnectError and an
    # HttpTimeout) is TIMEOUT, as aiohttp's ConnectionTimeoutError was.
    if isinstance(exc, (HttpTimeout, asyncio.TimeoutError)):
        return ErrorClass.TIMEOUT
    if isinstance(exc, ConnectError):
        return ErrorClass.CONNECT
    if isinstance(exc, ResetError):
        return ErrorClass.RESET
    if isinstance(exc, ProtocolError):
        return ErrorClass.DECODE
    return ErrorClass.OTHER


def split_base_url(base_url: str) -> tuple[str, int, str]:
    """(host, port, path prefix) of an ``http(s)://host[:port][/prefix]`` URL."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"the raw client speaks http or https to host:port, not {base_url!r}")
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), parts.path.rstrip("/")


def make_session(job: WorkerJob) -> HttpPool:
    """One keep-alive pool per worker for ``job.base_url``, bound to the worker's source address.

    No connection limit (the semaphores bound concurrency); usable as ``async with``.
    """
    host, port, _ = split_base_url(job.base_url)
    policy = job.shape.policy
    return HttpPool(
        host,
        port,
        job.source_ip,
        policy.connect_timeout_s,
        keepalive=True,
        retry_stale=False,
        keepalive_expiry_s=job.shape.scaled(policy.keepalive_expiry_s),
        tls=tls_for(job.base_url, job.access),
    )
