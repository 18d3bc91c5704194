"""Hypothesis strategies that build faultload's trials: load shapes, routers, fault schedules.

They build the same values the CLI takes (``LoadShape``, ``RouterConfig``,
``FaultSchedule``, ``TrialConfig``), so a generated trial can be written to a
repro file and run again with ``faultload replay``. Use them in your own
properties::

    from hypothesis import given
    from faultload.strategies import CI, trial_configs

    @given(trial_configs("skyrl==0.4.0", time_scale=0.05, limits=CI))
    def test_mine(config): ...

Each strategy shrinks toward the simplest case — fewer requests, smaller
results, no faults, one burst — and documents its minimal example:

===================================  ==============================================================
strategy                              minimal example
===================================  ==============================================================
``request_counts(max)``              ``1``
``result_sizes(max)``                ``1``
``sample_counts(max)``               ``1``
``outstanding_caps(requests)``       ``0`` (no cap) up to 4,096 requests, else ``4096``
``poll_behaviours(max_after_s)``     ``PollBehaviour()`` (no request polls late or abandons)
``client_policies()``                ``ClientPolicy()`` (the SDK's constants; no retry storm)
``arrivals(requests)``               ``("burst", 0.0, 1)``
``clients(limits)``                  ``"raw"`` (the real SDK for ``limits.sdk_fraction`` of draws)
``load_shapes(time_scale)``          ``minimal_shape(time_scale)``
``router_configs(shape)``            ``immediate_router(shape)``
``latency_routers(shape)``           ``max_num_seqs=256, gen_seconds=1 SDK s × scale``
``barrier_routers(shape)``           one wave of everything held, 20 SDK s × scale timeout
``faults(time_scale)``               ``edge:reset_peer`` downstream from t=0 for 5 SDK s × scale
``fault_schedules(time_scale)``      ``FaultSchedule()`` (no faults)
``trial_configs(target, scale)``     ``minimal_trial_config(target, scale)``
===================================  ==============================================================

Bounds come from a :class:`Limits` value (``CI``, ``NIGHTLY`` or your own).
"""

from faultload.strategies.faults import FATAL, fatal_kinds, fault_schedules, faults
from faultload.strategies.limits import CI, NIGHTLY, Limits
from faultload.strategies.routers import barrier_routers, immediate_router, latency_routers, router_configs
from faultload.strategies.shapes import (
    arrivals,
    client_policies,
    clients,
    load_shapes,
    minimal_shape,
    outstanding_caps,
    poll_behaviours,
    request_counts,
    result_sizes,
    sample_counts,
)
from faultload.strategies.trials import minimal_trial_config, proxies_for, sdk_reads_results, trial_configs

__all__ = [
    "CI",
    "NIGHTLY",
    "Limits",
    "FATAL",
    "fatal_kinds",
    "fault_schedules",
    "faults",
    "barrier_routers",
    "immediate_router",
    "latency_routers",
    "router_configs",
    "arrivals",
    "client_policies",
    "clients",
    "load_shapes",
    "minimal_shape",
    "outstanding_caps",
    "poll_behaviours",
    "request_counts",
    "result_sizes",
    "sample_counts",
    "minimal_trial_config",
    "proxies_for",
    "sdk_reads_results",
    "trial_configs",
]
