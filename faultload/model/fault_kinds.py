"""The fault kinds, each stated once in :data:`KINDS`, and the links and streams they apply to.

A kind's record says where it applies, what attributes it takes and what it is (a toxic, an outage, a process
fault, a router-timed call). Every table that names kinds — the spec parser's allowed attributes per link, the
strategies' draws, the fault runner's dispatch, the checkers' fatal and outage sets — is a view derived here.
:mod:`faultload.model.faults` checks a ``Fault`` against these tables, and its users import them from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

LINKS = ("edge", "backend", "router", "server")
PROXY_LINKS = ("edge", "backend")
# Toxiproxy's two streams, and "both": one toxic on each (Toxiproxy has no both-ways toxic).
TOXIPROXY_STREAMS = ("downstream", "upstream")
STREAMS = (*TOXIPROXY_STREAMS, "both")


@dataclass(frozen=True)
class FaultKind:
    """One kind of fault, stated once: where it applies, what it takes, and what it is. Everything else that
    names kinds (the spec parser, the strategies, the runner, the checkers) derives from :data:`KINDS`."""

    name: str
    links: tuple[str, ...]
    required: tuple[str, ...] = ()  # attributes, in Toxiproxy's units for a toxic
    optional: tuple[tuple[str, int], ...] = ()  # attributes with their defaults
    toxic: bool = False  # applied as a Toxiproxy toxic (it takes a stream and a toxicity)
    outage: bool = False  # cuts the link off rather than degrading it: the long windows
    process: bool = False  # acts on a process (SIGSTOP for a window, or a restart), not a socket
    router_timed: bool = False  # the router applies it and ends it on its own timer (an HTTP control call)
    fatal_on: tuple[str, ...] = ()  # links where its victims may fail without it being a lost result

    @property
    def attribute_names(self) -> tuple[str, ...]:
        """Its attributes in their stated order, required then optional: the order a router call takes them."""
        return (*self.required, *(name for name, _ in self.optional))

    @property
    def injected_by(self) -> str:
        """How the fault runner applies and heals it (:data:`INJECTORS`; faults/schedule.py has one pair each)."""
        if self.toxic:
            return "toxic"
        if self.process:
            return "process"
        if self.router_timed:
            return "router_timed"
        return {"down": "proxy_down", "crash": "router_crash"}[self.name]


KINDS: tuple[FaultKind, ...] = (
    FaultKind("latency", PROXY_LINKS, ("latency",), (("jitter", 0),), toxic=True),  # ms, ms
    FaultKind("bandwidth", PROXY_LINKS, ("rate",), toxic=True),  # KB/s
    FaultKind("slow_close", PROXY_LINKS, ("delay",), toxic=True),  # ms
    FaultKind("timeout", PROXY_LINKS, ("timeout",), toxic=True, outage=True, fatal_on=("backend",)),  # ms, 0: for ever
    FaultKind("reset_peer", PROXY_LINKS, (), (("timeout", 0),), toxic=True, outage=True, fatal_on=("backend",)),
    FaultKind("slicer", PROXY_LINKS, ("average_size",), (("size_variation", 0), ("delay", 0)), toxic=True),  # B, B, µs
    FaultKind("limit_data", PROXY_LINKS, ("bytes",), toxic=True, outage=True, fatal_on=("backend",)),
    FaultKind("down", PROXY_LINKS, outage=True, fatal_on=("backend",)),  # the proxy disabled: not a toxic
    FaultKind("stall", ("router",), router_timed=True),
    FaultKind("errors", ("router",), (), (("status", 503),), router_timed=True, fatal_on=("router",)),
    FaultKind("truncate", ("router",), router_timed=True, fatal_on=("router",)),
    FaultKind("crash", ("router",), fatal_on=("router",)),
    # SIGSTOP the router's processes or the server, SIGCONT at the window's end (a weight sync, a GC pause)
    FaultKind("pause", ("router", "server"), process=True),
    FaultKind("restart", ("server",), process=True, fatal_on=("server",)),  # an instant
)
KIND = {kind.name: kind for kind in KINDS}
# How a kind is applied and healed: a Toxiproxy toxic per stream; SIGSTOP/SIGCONT or a restart of a process; a
# call to the router's control endpoint that its own timer ends; the proxy disabled and enabled again; the
# router's processes killed and restarted. Every kind names one (FaultKind.injected_by).
INJECTORS = ("toxic", "process", "router_timed", "proxy_down", "router_crash")
Attributes = dict[str, tuple[tuple[str, ...], dict[str, int]]]  # kind -> (required, optional with defaults)


def _attributes(keep: Callable[[FaultKind], bool]) -> Attributes:
    return {k.name: (k.required, dict(k.optional)) for k in KINDS if keep(k)}


TOXIC_KINDS: Attributes = _attributes(lambda k: k.toxic)
# Faults that cut a link off rather than degrade it: a client behind one cannot reach the other side at all.
OUTAGE_KINDS = frozenset(k.name for k in KINDS if k.outage)
PROXY_KINDS: Attributes = _attributes(lambda k: k.links == PROXY_LINKS and not k.toxic)  # proxy faults, not toxics
ROUTER_KINDS: Attributes = _attributes(lambda k: "router" in k.links)
SERVER_KINDS: Attributes = _attributes(lambda k: "server" in k.links)
# The router faults applied by a call to its HTTP control endpoint, each ended by the router's own timer.
ROUTER_TIMED_KINDS = frozenset(k.name for k in KINDS if k.router_timed)
# Faults whose victims may fail without it being a lost result ("link:kind").
FATAL_FAULTS = frozenset(f"{link}:{k.name}" for k in KINDS for link in k.fatal_on)
# Process pauses need a window (a pause to the end is a collapse by construction); a restart is an instant.
PAUSE_FAULTS = ("server:pause", "router:pause")


def is_process_fault(link: str, kind: str) -> bool:
    """``server:pause``, ``server:restart``, ``router:pause``: a fault on a process, whose silence is the fault's."""
    found = KIND.get(kind)
    return found is not None and found.process and link in found.links


def kinds_for(link: str) -> dict[str, tuple[tuple[str, ...], dict[str, int]]]:
    """The kinds allowed on ``link`` with their (required, optional) attributes."""
    if link == "router":
        return ROUTER_KINDS
    if link == "server":
        return SERVER_KINDS
    return {**TOXIC_KINDS, **PROXY_KINDS}
