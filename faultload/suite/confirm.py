"""The ``confirm`` profile's one example: the full 131,072-request shape, fitted to this machine.

The same shape ``faultload confirm`` runs (latency router, 1,024 slots of 1 s,
no cap asked for), at time scale 1, with the outstanding cap, worker and
router processes sized by :func:`faultload.run.preflight.plan` so it measures the
server rather than this machine's fd limit.
"""

from __future__ import annotations

from faultload.model.faults import FaultSchedule
from faultload.model.router import RouterConfig
from faultload.model.shape import LoadShape
from faultload.model.trial import TrialConfig
from faultload.run.preflight import current_limits, plan
from faultload.suite.profiles import CONFIRM_REQUESTS


def confirm_config(target: str, regress: tuple[str, ...] = (), requests: int = CONFIRM_REQUESTS) -> TrialConfig:
    fit = plan(requests, 0, 0, current_limits())
    outstanding, workers, procs = fit.max_outstanding, fit.workers, fit.router_procs
    shape = LoadShape(requests=requests, max_outstanding=outstanding, workers=workers, time_scale=1.0)
    router = RouterConfig(mode="latency", max_num_seqs=1024, gen_seconds=1.0, procs=procs)
    return TrialConfig(
        target=target,
        shape=shape,
        router=router,
        regress=tuple(regress),
        faults=FaultSchedule(),
        proxies="off",
        max_wall_s=3600.0,
    )
