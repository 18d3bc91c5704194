"""Faults: Toxiproxy topology and timed toxics, router stalls/crashes (the nemesis).

* :mod:`.spec` — ``Fault``/``FaultSchedule`` as validated, JSON-round-tripping data;
* :mod:`.toxiproxy` — find/check/run the real toxiproxy-server;
* :mod:`.control` — bounded control calls over toxiproxy-python;
* :mod:`.topology` — the edge and backend proxies, teardown;
* :mod:`.schedule` — ``FaultRunner`` applies a schedule on time and heals.
"""

from .control import FaultControlError, ProxyInfo, ToxiproxyControl
from faultload.netutil import ephemeral_range, pick_free_port
from .schedule import AppliedFault, FaultLog, FaultRunner, RouterController, toxic_name
from .spec import Fault, FaultSchedule, parse_fault
from .topology import BACKEND, EDGE, Topology, create_proxy_on_free_port, create_topology, teardown
from .toxiproxy import PINNED_VERSION, ToxiproxyServer, check_toxiproxy, find_toxiproxy, reap_stale

__all__ = [
    "AppliedFault", "BACKEND", "EDGE", "Fault", "FaultControlError", "FaultLog", "FaultRunner",
    "FaultSchedule", "PINNED_VERSION", "ProxyInfo", "RouterController", "Topology", "ToxiproxyControl",
    "ToxiproxyServer", "check_toxiproxy", "create_proxy_on_free_port", "create_topology",
    "ephemeral_range", "find_toxiproxy", "parse_fault", "pick_free_port", "reap_stale", "teardown",
    "toxic_name",
]
