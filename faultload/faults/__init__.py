"""Faults: Toxiproxy topology and timed toxics, router stalls/crashes (the nemesis).

* :mod:`.spec` — ``Fault``/``FaultSchedule`` as validated, JSON-round-tripping data;
* :mod:`.toxiproxy` — find/check/run the real toxiproxy-server;
* :mod:`.control` — bounded control calls over toxiproxy-python;
* :mod:`.topology` — the edge and backend proxies, teardown;
* :mod:`.schedule` — ``FaultRunner`` applies a schedule on time and heals.
"""

import importlib
from typing import Any

# Names are imported on first use (PEP 562): `faultload.faults.spec` is needed by
# every process (the CLI, each spawned load worker), the Toxiproxy client only by
# the trial's parent.
_WHERE = {
    "FaultControlError": "control", "ProxyInfo": "control", "ToxiproxyControl": "control",
    "ephemeral_range": "faultload.netutil", "pick_free_port": "faultload.netutil",
    "AppliedFault": "schedule", "FaultLog": "schedule", "FaultRunner": "schedule",
    "RouterController": "schedule", "toxic_name": "schedule",
    "Fault": "spec", "FaultSchedule": "spec", "parse_fault": "spec",
    "BACKEND": "topology", "EDGE": "topology", "Topology": "topology",
    "create_proxy_on_free_port": "topology", "create_topology": "topology", "teardown": "topology",
    "PINNED_VERSION": "toxiproxy", "ToxiproxyServer": "toxiproxy", "check_toxiproxy": "toxiproxy",
    "find_toxiproxy": "toxiproxy", "reap_stale": "toxiproxy",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(where if "." in where else f"{__name__}.{where}")
    return getattr(module, name)


__all__ = [
    "AppliedFault", "BACKEND", "EDGE", "Fault", "FaultControlError", "FaultLog", "FaultRunner",
    "FaultSchedule", "PINNED_VERSION", "ProxyInfo", "RouterController", "Topology", "ToxiproxyControl",
    "ToxiproxyServer", "check_toxiproxy", "create_proxy_on_free_port", "create_topology",
    "ephemeral_range", "find_toxiproxy", "parse_fault", "pick_free_port", "reap_stale", "teardown",
    "toxic_name",
]
