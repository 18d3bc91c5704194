"""Bounded control of a Toxiproxy server, over toxiproxy-python.

toxiproxy-python 0.1.1 has two traits that matter under load:

* it calls ``requests.get/post/delete`` with no timeout, so a wedged server
  blocks the caller forever.  It uses no session we could configure, so its
  module-level ``requests`` name is pointed at :class:`_BoundedRequests`, which
  adds this adapter's timeout to every call and raises on 5xx (the library
  ignores those and fails later with a KeyError);
* it keeps the server address in class attributes of ``APIConsumer`` (one
  server per process).  Every library call therefore runs under one lock that
  sets the address first; calls are short, so serialising them costs nothing.

Async methods run the blocking call in a thread under ``asyncio.wait_for``: a
thread cannot be killed, but with the requests timeout it ends on its own
shortly after the caller has been released.  What the library lacks (updating a
toxic, listing toxics with their attributes) goes straight to the same HTTP API.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar

import requests
import toxiproxy.api as _tp_api
from toxiproxy import Toxiproxy as _TpServer
from toxiproxy.proxy import Proxy as _TpProxy

T = TypeVar("T")
_LIB_LOCK = threading.Lock()  # guards toxiproxy-python's class-level host/port


class FaultControlError(RuntimeError):
    """A Toxiproxy control call failed or did not finish within its time limit."""


class NotRestored(FaultControlError):
    """A process fault took effect (the process was stopped) but its end did not come: the process did not
    answer again. The fault is in force from then on, not "never applied"."""


def _describe(exc: Exception) -> str:
    """One line; the library's exceptions carry the raw response body as bytes."""
    detail = exc.args[0] if exc.args else ""
    if isinstance(detail, bytes):
        detail = detail.decode(errors="replace")
    # Its 409 is always "ProxyExists", also for a duplicate toxic: the body says which.
    return f"{type(exc).__name__}: {' '.join(str(detail).split())}"


class _BoundedRequests:
    """Stand-in for the ``requests`` module inside toxiproxy.api: timeout + 5xx check."""

    def __init__(self) -> None:
        self.timeout_s = 5.0

    def _call(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", self.timeout_s)
        try:
            response = requests.request(method, url, **kwargs)
        except requests.RequestException as exc:
            raise FaultControlError(f"toxiproxy {method} {url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500:
            raise FaultControlError(f"toxiproxy {method} {url}: {response.status_code} {response.text.strip()[:200]}")
        return response

    def get(self, url: str, **kwargs: Any) -> requests.Response:
        return self._call("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> requests.Response:
        return self._call("POST", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> requests.Response:
        return self._call("DELETE", url, **kwargs)


_BOUNDED = _BoundedRequests()
_tp_api.requests = _BOUNDED  # type: ignore[assignment]


@dataclass(frozen=True)
class ProxyInfo:
    """Where one proxy listens and what it forwards to."""

    name: str
    listen_host: str
    listen_port: int
    upstream: str

    @property
    def address(self) -> str:
        return f"{self.listen_host}:{self.listen_port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"


class ToxiproxyControl:
    """Every control call bounded by ``timeout_s``; sync methods plus ``a``-prefixed async twins."""

    def __init__(self, host: str, port: int, timeout_s: float = 5.0) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._lib = _TpServer()

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- plumbing ---------------------------------------------------------
    def _with_lib(self, what: str, fn: Callable[[], T]) -> T:
        """Run one toxiproxy-python call against this server, bounded and with clear errors."""
        if not _LIB_LOCK.acquire(timeout=self.timeout_s):
            raise FaultControlError(f"toxiproxy {what}: control lock busy for {self.timeout_s} s")
        try:
            _tp_api.APIConsumer.host, _tp_api.APIConsumer.port = self.host, self.port
            _BOUNDED.timeout_s = self.timeout_s
            return fn()
        except FaultControlError:
            raise
        except Exception as exc:  # the library raises NotFound/ProxyExists/InvalidToxic/KeyError
            raise FaultControlError(f"toxiproxy {what} at {self.api_url}: {_describe(exc)}") from exc
        finally:
            _LIB_LOCK.release()

    def _http(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """Direct API call for what the library lacks."""
        url = self.api_url + path
        try:
            response = requests.request(method, url, json=body, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise FaultControlError(f"toxiproxy {method} {path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 300:
            raise FaultControlError(f"toxiproxy {method} {path}: {response.status_code} {response.text.strip()[:200]}")
        return response.json() if response.content else None

    async def _async(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a sync method off the event loop, bounded by the same time limit."""
        call = functools.partial(fn, *args, **kwargs)
        try:
            return await asyncio.wait_for(asyncio.to_thread(call), self.timeout_s)
        except asyncio.TimeoutError:
            raise FaultControlError(
                f"toxiproxy {fn.__name__} at {self.api_url} did not finish within {self.timeout_s} s"
            ) from None

    def _proxy(self, name: str) -> _TpProxy:
        # The library's Proxy methods need only the name; avoid an extra GET.
        return _TpProxy(name=name, upstream="", enabled=True, listen="")

    # -- sync API ---------------------------------------------------------
    def version(self) -> str:
        """Server version, e.g. ``2.12.0``."""
        return str(self._http("GET", "/version")["version"])

    def proxies(self) -> dict[str, dict[str, Any]]:
        """name -> {listen, upstream, enabled, toxics}, straight from the API."""
        return dict(self._http("GET", "/proxies"))

    def create_proxy(self, name: str, listen_port: int, upstream: str, listen_host: str = "127.0.0.1") -> ProxyInfo:
        """Create a proxy listening on ``listen_host:listen_port`` forwarding to ``upstream``."""
        listen = f"{listen_host}:{listen_port}"
        proxy = self._with_lib(f"create {name}", lambda: self._lib.create(upstream=upstream, name=name, listen=listen))
        host, _, port = str(proxy.listen).rpartition(":")
        return ProxyInfo(name=name, listen_host=host or listen_host, listen_port=int(port), upstream=upstream)

    def enable(self, name: str) -> None:
        """Proxy up: listen and accept again."""
        self._with_lib(f"enable {name}", lambda: self._proxy(name).enable())

    def disable(self, name: str) -> None:
        """Proxy down: stop listening and drop its connections."""
        self._with_lib(f"disable {name}", lambda: self._proxy(name).disable())

    def add_toxic(
        self,
        proxy: str,
        name: str,
        kind: str,
        attributes: Mapping[str, int],
        stream: str = "downstream",
        toxicity: float = 1.0,
    ) -> None:
        """Add toxic ``name`` of type ``kind`` to ``proxy``."""
        self._with_lib(
            f"add toxic {name} to {proxy}",
            lambda: self._proxy(proxy).add_toxic(
                type=kind, name=name, stream=stream, toxicity=toxicity, attributes=dict(attributes)
            ),
        )

    def update_toxic(
        self, proxy: str, name: str, attributes: Mapping[str, int] | None = None, toxicity: float | None = None
    ) -> dict[str, Any]:
        """Change an existing toxic in place (PATCH; the library has no such call)."""
        body: dict[str, Any] = {}
        if attributes is not None:
            body["attributes"] = dict(attributes)
        if toxicity is not None:
            body["toxicity"] = toxicity
        return dict(self._http("PATCH", f"/proxies/{proxy}/toxics/{name}", body))

    def remove_toxic(self, proxy: str, name: str) -> None:
        """Remove toxic ``name`` from ``proxy``."""
        self._with_lib(f"remove toxic {name} from {proxy}", lambda: self._proxy(proxy).destroy_toxic(name))

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        """The toxics on ``proxy`` with their attributes, straight from the API."""
        return list(self._http("GET", f"/proxies/{proxy}/toxics"))

    def reset(self) -> None:
        """Remove every toxic and enable every proxy (``POST /reset``)."""
        self._with_lib("reset", lambda: self._lib.reset())

    def destroy(self, name: str) -> None:
        """Delete one proxy."""
        self._with_lib(f"destroy {name}", lambda: self._proxy(name).destroy())

    def destroy_all(self) -> None:
        """Delete every proxy on the server."""
        self._with_lib("destroy all", lambda: self._lib.destroy_all())

    # -- async twins (off the event loop, bounded) --------------------------
    async def aproxies(self) -> dict[str, dict[str, Any]]:
        return await self._async(self.proxies)

    async def aenable(self, name: str) -> None:
        await self._async(self.enable, name)

    async def adisable(self, name: str) -> None:
        await self._async(self.disable, name)

    async def aadd_toxic(
        self,
        proxy: str,
        name: str,
        kind: str,
        attributes: Mapping[str, int],
        stream: str = "downstream",
        toxicity: float = 1.0,
    ) -> None:
        await self._async(self.add_toxic, proxy, name, kind, attributes, stream, toxicity)

    async def aremove_toxic(self, proxy: str, name: str) -> None:
        await self._async(self.remove_toxic, proxy, name)

    async def atoxics(self, proxy: str) -> list[dict[str, Any]]:
        return await self._async(self.toxics, proxy)

    async def areset(self) -> None:
        await self._async(self.reset)
