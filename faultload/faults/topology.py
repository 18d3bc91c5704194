"""The two proxies of a trial and how they are torn down.

``edge`` sits between the load workers and the API server, ``backend`` between
the API server and the (fake) router.  Their listen ports are picked below the
ephemeral range; a port taken between the check and Toxiproxy's bind is simply
picked again (bounded).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from faultload.faults.control import FaultControlError, ProxyInfo, ToxiproxyControl
from faultload.faults.toxiproxy import ToxiproxyServer
from faultload.host.network import pick_free_port

EDGE = "edge"
BACKEND = "backend"


@dataclass(frozen=True)
class Topology:
    """Where the edge and backend proxies listen; ``names`` maps link -> proxy name."""

    edge: ProxyInfo
    backend: ProxyInfo

    @property
    def names(self) -> dict[str, str]:
        return {EDGE: self.edge.name, BACKEND: self.backend.name}


def create_proxy_on_free_port(
    control: ToxiproxyControl,
    name: str,
    upstream: str,
    host: str = "127.0.0.1",
    rng: random.Random | None = None,
    attempts: int = 5,
    exclude: set[int] | frozenset[int] = frozenset(),
) -> ProxyInfo:
    """Create ``name`` -> ``upstream`` on a free port below the ephemeral range (none of ``exclude``)."""
    rng = rng or random.Random()
    last: Exception | None = None
    for _ in range(attempts):
        port = pick_free_port(host, rng=rng, exclude=exclude)
        try:
            return control.create_proxy(name, port, upstream, listen_host=host)
        except FaultControlError as exc:
            if "already exists" in str(exc) or "ProxyExists" in str(exc):
                raise
            last = exc
    raise FaultControlError(f"could not create proxy {name} after {attempts} ports: {last}")


def create_topology(
    control: ToxiproxyControl,
    api_upstream: str,
    router_upstream: str,
    host: str = "127.0.0.1",
    rng: random.Random | None = None,
    names: tuple[str, str] = (EDGE, BACKEND),
    backend_port: int | None = None,
    exclude: frozenset[int] = frozenset(),
) -> Topology:
    """Create the edge proxy (-> ``api_upstream``) and the backend proxy (-> ``router_upstream``).

    ``backend_port``: the port a server already started was told to forward to (no other is tried).
    ``exclude``: ports the edge must not take though they look free (a server still starting has
    not bound its own yet); the backend's port is never the edge's either.
    """
    rng = rng or random.Random()
    taken = exclude | ({backend_port} if backend_port is not None else set())
    edge = create_proxy_on_free_port(control, names[0], api_upstream, host, rng, exclude=taken)
    if backend_port is not None:
        backend = control.create_proxy(names[1], backend_port, router_upstream, listen_host=host)
    else:
        backend = create_proxy_on_free_port(control, names[1], router_upstream, host, rng)
    return Topology(edge=edge, backend=backend)


def teardown(control: ToxiproxyControl | None, server: ToxiproxyServer | None) -> list[str]:
    """Reset, delete every proxy, stop the server; never raises, returns what failed.

    Each step is bounded by the control's time limit, and the server is stopped
    even when the API no longer answers.
    """
    errors: list[str] = []
    if control is not None:
        for step in (control.reset, control.destroy_all):
            try:
                step()
            except FaultControlError as exc:
                errors.append(str(exc))
    if server is not None:
        try:
            server.stop()
        except OSError as exc:
            errors.append(f"stopping toxiproxy-server: {exc}")
    return errors
