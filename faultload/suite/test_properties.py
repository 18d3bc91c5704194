"""The suite's properties: one per group of invariants, plus one asserting them all.

Run with ``pytest faultload [--faultload-profile ci|nightly|confirm]
[--faultload-target SPEC] [--faultload-regress NAME]``. Each example draws a
whole ``TrialConfig`` (``faultload.strategies.trial_configs``), runs it on the session's
shared stack, judges it and asserts its property's invariants; Hypothesis
shrinks a failure toward fewer requests, smaller results, no faults and one
burst, and the plugin writes the shrunk trial as a repro for
``faultload replay``.

Some properties draw a restricted space (``Property.limits``):

* ``no_lost_results`` is about results outliving the polls that ask for them,
  so every trial drops a fraction of its first polls and re-polls after a
  timer landmark (45, 75, 200 or 400 SDK s), and the router always takes time
  (latency or barrier): with an immediate router the result is there before
  the first poll and nothing can outlive anything.
* ``retry_amplification`` (and so the combined property) draws no retry
  storms and keeps a request's wait for its result under 60 SDK seconds: the
  retry budget is stated for the SDK's own policy, and a storm, or a result
  that takes several poll timeouts, multiplies the client's attempts by
  design — the other properties put that load on the server.

On profiles with ``known_examples`` (nightly), ``bounded_resources`` and
``bounded_retries`` first run the known-bug trials of ``faultload.strategies.known``
as explicit examples: the load a fixed upstream bug needs, so a regression of
it is met every run rather than when a random draw happens to make that load.

What a property draws and how (its Hypothesis settings, strategy, explicit
examples, skip) depends on the session's options, and decorators run when the
module is imported: each decorator here reads the session of the pytest run
importing it (``plugin.collecting()``, the plugin's per-session
:class:`~faultload.suite.session.SuiteSession`), nothing is fixed at the first
import. The settings are the session's Hypothesis profile ``faultload-<name>``
with the property's examples (``SuiteSession.settings_for``), so a
``--hypothesis-profile`` of yours composes with them.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from faultload.model.target import parse_target, serves_training
from faultload.strategies import trial_configs
from faultload.suite import comparative, plugin
from faultload.suite.confirm import confirm_config
from faultload.suite.properties import (
    COMBINED,
    COMPARATIVE,
    HEALTH,
    INTEGRITY,
    LOST,
    RESOURCES,
    RETRIES,
    SERVER_LOG,
    TRAINING,
    Property,
    known_configs,
    property_limits,
)
from faultload.suite.session import SuiteSession

pytestmark = pytest.mark.faultload


only_combined = pytest.mark.skipif(
    plugin.collecting().profile.confirm, reason="the confirm profile runs the combined property once"
)
with_training = pytest.mark.skipif(
    plugin.collecting().profile.limits.max_trainers <= 0,
    reason="this profile draws no training (the nightly profile does)",
)
trains = pytest.mark.skipif(
    not serves_training(parse_target(plugin.collecting().options.target)),
    reason=f"{plugin.collecting().options.target} serves sampling only: no training to draw",
)
with_baseline = pytest.mark.skipif(
    plugin.collecting().options.baseline is None and plugin.collecting().options.baseline_missing is None,
    reason="no --faultload-baseline BUILD: nothing to compare the target with",
)


def _settings(prop: Property) -> settings:
    """The session's Hypothesis profile (``faultload-<name>``) with the property's examples."""
    return plugin.collecting().settings_for(prop)


def _with_session_builds(session: SuiteSession, config):
    """The session's candidate fixes (``--faultload-fix``) and SDK release (``--faultload-sdk``, on a shape the
    real SDK runs) on a config: they change no draw, only the server and the SDK that load it."""
    opts = session.options
    if opts.fixes:
        config = dataclasses.replace(config, fixes=opts.fixes)
    if opts.sdk and config.shape.client == "sdk":
        config = dataclasses.replace(config, shape=dataclasses.replace(config.shape, sdk=opts.sdk))
    return config


def _configs(prop: Property) -> st.SearchStrategy:
    session = plugin.collecting()
    opts = session.options
    if session.profile.confirm:
        return st.just(_with_session_builds(session, confirm_config(opts.target, opts.regress)))
    configs = trial_configs(
        opts.target, session.profile.time_scale, opts.regress, property_limits(session.profile, prop, opts.target)
    )
    return configs.map(lambda config: _with_session_builds(session, config)) if opts.fixes or opts.sdk else configs


def _known(prop: Property):
    """The property's known-bug trials (faultload.strategies.known) as explicit examples, when the profile runs them."""
    session = plugin.collecting()

    def apply(test):
        for config in known_configs(session.profile, prop, session.options.target, session.options.regress):
            test = example(config=_with_session_builds(session, config))(test)
        return test

    return apply


def _property(prop: Property, configs: st.SearchStrategy | None = None):
    """A property's test decorator: the session's settings for it, its known trials first (when the profile
    runs them), then its draws (``configs``, else the property's own)."""

    def apply(test):
        test = given(config=_configs(prop) if configs is None else configs)(test)
        return settings(_settings(prop))(_known(prop)(test))

    return apply


@only_combined
@_property(LOST)
def test_no_lost_results(faultload_suite, config):
    """Every asample is accepted, and every accepted request ends with its result (no 404s, no give-ups
    outside fatal faults)."""
    faultload_suite.check(LOST, config)


@only_combined
@_property(INTEGRITY)
def test_result_integrity(faultload_suite, config):
    """Every result that arrives is its own request's, whole."""
    faultload_suite.check(INTEGRITY, config)


@only_combined
@_property(RESOURCES)
def test_bounded_resources(faultload_suite, config):
    """Server fds, RSS and CPU per request stay within budget, and fds and RSS come back after the load."""
    faultload_suite.check(RESOURCES, config)


@only_combined
@_property(HEALTH)
def test_health(faultload_suite, config):
    """/healthz stays fast and answering under load; the server never collapses."""
    faultload_suite.check(HEALTH, config)


@only_combined
@_property(RETRIES)
def test_bounded_retries(faultload_suite, config):
    """HTTP attempts per request stay within budget under the SDK's own policy; no connection is reset
    outside a fault."""
    faultload_suite.check(RETRIES, config)


@only_combined
@_property(SERVER_LOG)
def test_clean_server_log(faultload_suite, config):
    """No error lines in the server log unless a fault was active."""
    faultload_suite.check(SERVER_LOG, config)


@with_training
@trains
@only_combined
@_property(TRAINING)
def test_training(faultload_suite, config):
    """Trainers beside the samples get every training future's own result, every session's heartbeat
    is answered in time, and the server's log shows no error (its DB pool exhausted, a DB lock) doing it."""
    faultload_suite.check(TRAINING, config)


@_property(COMBINED)
def test_all_invariants(faultload_suite, config):
    """Every invariant at once."""
    faultload_suite.check(COMBINED, config)


@with_baseline
@only_combined
@_property(COMPARATIVE, _configs(COMPARATIVE).map(comparative.at_least))
def test_comparative_no_worse_than_baseline(faultload_suite, config):
    """The target (with its switches) is no worse than ``--faultload-baseline``'s build on a load without
    faults: no metric's ratio past its [tool.faultload.compare] threshold with its whole interval past 1,
    and every metric measured on both (each example: 2 x the profile's compare_repeats trials, ABBA)."""
    faultload_suite.check(COMPARATIVE, config)
