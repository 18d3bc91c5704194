"""The whole trial: ``TrialConfig`` values exactly like the ones ``faultload run`` builds."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Iterable

from hypothesis import strategies as st

from faultload.model.family import CONTRACTS, TRAITS, ServerContract
from faultload.model.faults import FaultSchedule
from faultload.model.target import parse_target
from faultload.model.timescale import trial_s
from faultload.model.trial import TrialConfig
from faultload.strategies.edges import around_edges
from faultload.strategies.faults import fatal_kinds, fault_schedules
from faultload.strategies.limits import CI, Limits
from faultload.strategies.routers import barrier_fitting_requests, immediate_router, router_configs
from faultload.strategies.shapes import load_shapes, minimal_shape, with_requests


def _config(
    target: str, time_scale: float, regress: Iterable[str], limits: Limits, shape, router, faults, proxies: str
) -> TrialConfig:
    return TrialConfig(
        target=target,
        shape=shape,
        router=router,
        regress=tuple(regress),
        faults=faults,
        proxies=proxies,
        fatal_faults=fatal_kinds(faults),
        max_wall_s=limits.max_wall_real_s,
        drain_s=limits.drain_real_s,
        engine=engine_for(limits),
    )


def engine_for(limits: Limits) -> str:
    """The engine every trial of a session runs (one shared stack): null when the session may train."""
    return "null" if limits.max_trainers > 0 else "sleeper"


# Share of the server's (scaled) retrieved TTL the SDK's unscaled backoff may take after a fault.
SDK_BACKOFF_SHARE = 0.75


def sdk_reads_results(target: str) -> bool:
    """Whether the real SDK (tinker 0.25) can read ``target``'s results: it takes proto only, which a family
    sends from its ``FamilyTraits.sdk_reads_since`` release on (SkyRL 0.3.0 answers JSON), and a family whose
    ``sdk_reads_results`` is False never does (hatchery-core). Checkouts and urls: assumed current."""
    family = re.split(r"==|@|\+url=", target.strip(), maxsplit=1)[0]  # a checkout's folder need not exist here
    if family in TRAITS and not TRAITS[family].sdk_reads_results:
        return False
    since = TRAITS[family].sdk_reads_since if "==" in target and family in TRAITS else None
    if since is None:
        return True
    return tuple(int(part) for part in (parse_target(target).version or "0.0").split(".")[:2]) >= since


def sdk_outlasts_faults(faults: FaultSchedule, time_scale: float, contract: ServerContract) -> bool:
    """Whether the SDK's unscaled backoff recovers from ``faults`` while a server of ``contract`` still keeps
    results.

    The SDK sleeps ``min(2**n, 30)`` real seconds after its n-th connection
    error in a row, whatever the time scale, so its first attempt after a
    fault ending at E trial seconds comes by about 2E + 1 s. That must fall
    within SDK_BACKOFF_SHARE of the soonest the server may forget a result by
    design (scaled; SkyRL: its retrieved TTL; a family that keeps results until
    it stops: never): a later re-poll meets a 404 the scale made, not the
    server. Faults to the trial's end never fit, nor do faults anchored at an
    event (when it comes is not known before the trial).
    """
    ends = [
        math.inf if f.duration_s is None or f.anchor is not None else f.start_s + f.duration_s for f in faults.faults
    ]
    end = max(ends, default=0.0)
    if math.isinf(end):
        return False
    soonest = contract.earliest_loss_s
    return soonest is None or 2.0 * end + 1.0 <= trial_s(SDK_BACKOFF_SHARE * soonest, time_scale)


def proxies_for(limits: Limits) -> str:
    """Every trial of one suite run shares a stack, so the proxies are on for all or none."""
    return "on" if limits.max_faults > 0 and limits.fault_links else "off"


@st.composite
def trial_configs(
    draw, target: str, time_scale: float, regress: Iterable[str] = (), limits: Limits = CI
) -> TrialConfig:
    """A full ``TrialConfig`` for ``target`` at ``time_scale`` with ``regress`` undone.

    Shape, router and faults come from :func:`faultload.strategies.load_shapes`,
    :func:`faultload.strategies.router_configs` and :func:`faultload.strategies.fault_schedules`;
    ``fatal_faults`` declares the schedule's forward-breaking faults
    (:func:`faultload.strategies.fatal_kinds`); ``proxies`` is fixed by ``limits``
    (:func:`proxies_for`) so that every drawn config fits one shared stack.
    The real SDK client runs a share of the trials (``limits.sdk_fraction``;
    see :func:`faultload.strategies.shapes.clients`) where ``target``'s results are
    readable by it (:func:`sdk_reads_results`) and its unscaled backoff fits
    the drawn faults (:func:`sdk_outlasts_faults`; otherwise the raw client
    runs the same shape); its faults start at clock times only. Where
    ``limits.draws_around_edges``, late polls may come just inside and outside
    ``target``'s TTLs (:func:`faultload.strategies.edges.around_edges`), and always at its family's
    landmarks (:func:`faultload.strategies.shapes.poll_landmarks`); the router fits what ``target``'s family
    forwards at once (:func:`faultload.strategies.routers.router_configs`). A barrier router's waves must fit half the wall
    bound even if each one times out: the shape's requests are lowered after every draw
    (:func:`faultload.strategies.routers.barrier_fitting_requests`), so the draws are
    the same.

    Minimal: :func:`minimal_trial_config` — one 1-token request, one burst,
    no cap, no late polls, the SDK's policy, the immediate router, no faults.
    """
    regress = tuple(regress)
    contract = CONTRACTS[parse_target(target).family]
    edges = around_edges(contract) if limits.draws_around_edges else ()
    shape = draw(load_shapes(time_scale, limits, sdk=sdk_reads_results(target), around_edges=edges, contract=contract))
    router = draw(router_configs(shape, limits, contract))
    # When an anchored fault ends is not known before the trial: an SDK shape draws clock starts only.
    fault_limits = limits.replace(fault_anchors=()) if shape.client == "sdk" else limits
    faults = draw(fault_schedules(time_scale, fault_limits, contract))
    if shape.client == "sdk" and not sdk_outlasts_faults(faults, time_scale, contract):
        shape = dataclasses.replace(shape, client="raw")  # an SDK shape is a valid raw one
    shape = with_requests(shape, barrier_fitting_requests(shape, router, limits))
    return _config(target, time_scale, regress, limits, shape, router, faults, proxies_for(limits))


def minimal_trial_config(
    target: str, time_scale: float, regress: Iterable[str] = (), limits: Limits = CI
) -> TrialConfig:
    """What :func:`trial_configs` shrinks to."""
    shape = minimal_shape(time_scale)
    return _config(
        target, time_scale, tuple(regress), limits, shape, immediate_router(shape), FaultSchedule(), proxies_for(limits)
    )
