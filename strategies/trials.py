"""The whole trial: ``TrialConfig`` values exactly like the ones ``faultload run`` builds."""

from __future__ import annotations

from typing import Iterable

from hypothesis import strategies as st

from faultload.faults.spec import FaultSchedule
from faultload.trial import TrialConfig
from strategies.faults import fatal_kinds, fault_schedules
from strategies.limits import CI, Limits
from strategies.routers import barrier_fitting_requests, immediate_router, router_configs
from strategies.shapes import load_shapes, minimal_shape, with_requests


def _config(target: str, time_scale: float, regress: Iterable[str], limits: Limits, shape, router, faults,
            proxies: str) -> TrialConfig:
    return TrialConfig(
        target=target, shape=shape, router=router, regress=tuple(regress), faults=faults, proxies=proxies,
        fatal_faults=fatal_kinds(faults), max_wall_s=limits.max_wall_real_s, drain_s=limits.drain_real_s,
    )


def proxies_for(limits: Limits) -> str:
    """Every trial of one suite run shares a stack, so the proxies are on for all or none."""
    return "on" if limits.max_faults > 0 and limits.fault_links else "off"


@st.composite
def trial_configs(draw, target: str, time_scale: float, regress: Iterable[str] = (), limits: Limits = CI) -> TrialConfig:
    """A full ``TrialConfig`` for ``target`` at ``time_scale`` with ``regress`` undone.

    Shape, router and faults come from :func:`strategies.load_shapes`,
    :func:`strategies.router_configs` and :func:`strategies.fault_schedules`;
    ``fatal_faults`` declares the schedule's forward-breaking faults
    (:func:`strategies.fatal_kinds`); ``proxies`` is fixed by ``limits``
    (:func:`proxies_for`) so that every drawn config fits one shared stack.
    A barrier router's waves must fit half the wall bound even if each one
    times out: the shape's requests are lowered after every draw
    (:func:`strategies.routers.barrier_fitting_requests`), so the draws are
    the same.

    Minimal: :func:`minimal_trial_config` — one 1-token request, one burst,
    no cap, no late polls, the SDK's policy, the immediate router, no faults.
    """
    regress = tuple(regress)
    shape = draw(load_shapes(time_scale, limits))
    router = draw(router_configs(shape, limits))
    faults = draw(fault_schedules(time_scale, limits))
    shape = with_requests(shape, barrier_fitting_requests(shape, router, limits))
    return _config(target, time_scale, regress, limits, shape, router, faults, proxies_for(limits))


def minimal_trial_config(target: str, time_scale: float, regress: Iterable[str] = (), limits: Limits = CI) -> TrialConfig:
    """What :func:`trial_configs` shrinks to."""
    shape = minimal_shape(time_scale)
    return _config(target, time_scale, tuple(regress), limits, shape, immediate_router(shape), FaultSchedule(),
                   proxies_for(limits))
