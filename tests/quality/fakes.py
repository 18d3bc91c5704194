"""Test doubles for the suite engine's own tests: an executor whose failure is known in advance, a clock.

:class:`KnownFailure` is a TEST DOUBLE of :class:`faultload.suite.executor.Executor`:
it starts no server and runs no trial. It answers each config with real
:class:`faultload.checker.inputs.Verdict` values by a rule fixed beforehand — the
trial fails iff it has at least ``min_requests`` requests and a fault of
``link:kind`` — so a test knows exactly what the engine's reducer, Hypothesis's
shrinker, the cache, the tallies and the repro must come to.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from hypothesis import strategies as st

from faultload.checker.budgets import load_budgets
from faultload.checker.inputs import Verdict
from faultload.host.workspace import Workspace
from faultload.model.faults import Fault, FaultSchedule
from faultload.model.shape import PollBehaviour
from faultload.store.repro import config_key
from faultload.strategies import CI, Limits, fatal_kinds, minimal_trial_config, trial_configs
from faultload.suite.executor import SuiteError, TrialOutcome
from faultload.suite.profiles import Profile, get_profile
from faultload.suite.properties import ALL
from faultload.suite.reducer import with_requests
from faultload.suite.runner import SuiteRunner

TARGET = "skyrl==0.4.0"
TIME_SCALE = 0.05


@dataclass
class FakeClock:
    """A TEST DOUBLE of ``time.monotonic`` that moves only when told (starts at the real clock's now).

    It starts at the real ``time.monotonic()`` because ``PropertyState.started``
    is taken from the real clock; tests advance it by seconds, so the
    microseconds of real time a test takes do not matter.
    """

    now: float = field(default_factory=time.monotonic)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def as_time_module(self) -> SimpleNamespace:
        """What ``faultload.suite.runner.time`` is replaced with (monotonic from this clock)."""
        return SimpleNamespace(monotonic=self, strftime=time.strftime)


@dataclass
class KnownFailure:
    """TEST DOUBLE executor: ``invariant`` is violated iff requests >= ``min_requests`` and a
    ``link:kind`` fault is scheduled; ok otherwise.

    ``unknown=True``: every verdict is unknown (``ok None``), as a trial that
    measured nothing. ``unknown_for``: invariants always unknown (as
    ``bounded_cpu`` is on small trials). ``suite_error``: ``run`` raises
    :class:`SuiteError` with it (the stack could not start); ``harness_error``:
    ``run`` returns an outcome with that error (the trial raised). ``clock`` and
    ``trial_s``: each run advances the clock, as a real trial takes time.
    ``record_to``: a JSON-lines file each run appends to (for a pytest run in
    another process). ``ran`` is every config it was asked to run, in order.
    """

    min_requests: int = 40
    link: str = "backend"
    kind: str = "down"
    invariant: str = "no_lost_results"
    unknown: bool = False
    unknown_for: tuple[str, ...] = ()
    suite_error: str | None = None
    harness_error: str | None = None
    unjudged: str | None = None  # ``run`` returns an outcome that is no test of the target (a fault never healed)
    refused: str | None = None  # ``run`` returns the server's failure before any load (no session opened)
    clock: FakeClock | None = None
    trial_s: float = 0.0
    record_to: Path | None = None
    ran: list = field(default_factory=list)
    closed: int = 0

    def has_fault(self, config) -> bool:
        return any(f.link == self.link and f.kind == self.kind for f in config.faults.faults)

    def fails(self, config) -> bool:
        return config.shape.requests >= self.min_requests and self.has_fault(config)

    def verdicts(self, config) -> list[Verdict]:
        out = []
        for name in ALL:
            if self.unknown or name in self.unknown_for:
                out.append(Verdict(name=name, ok=None, figure=None, budget=None, head="test double: unknown"))
            elif name == self.invariant:
                failing = self.fails(config)
                out.append(
                    Verdict(
                        name=name,
                        ok=not failing,
                        figure=config.shape.requests,
                        budget=self.min_requests,
                        head=f"test double: {'fails' if failing else 'holds'} at {config.shape.requests} "
                        f"requests with {self.link}:{self.kind} {'present' if self.has_fault(config) else 'absent'}",
                    )
                )
            else:
                out.append(Verdict(name=name, ok=True, figure=0, budget=0, head="test double: holds"))
        return out

    def run(self, config) -> TrialOutcome:
        self.ran.append(config)
        if self.record_to is not None:
            with open(self.record_to, "a") as out:
                out.write(
                    json.dumps(
                        {"key": config_key(config), "requests": config.shape.requests, "fails": self.fails(config)}
                    )
                    + "\n"
                )
        if self.suite_error is not None:
            raise SuiteError(self.suite_error)
        if self.clock is not None:
            self.clock.advance(self.trial_s)
        verdicts = self.verdicts(config)
        figures = {v.name: {"ok": v.ok, "figure": v.figure, "budget": v.budget} for v in verdicts}
        if self.harness_error is not None:
            return TrialOutcome([], {}, config.shape.requests, self.trial_s, error=self.harness_error)
        if self.unjudged is not None:
            return TrialOutcome([], {}, config.shape.requests, self.trial_s, unjudged=self.unjudged)
        if self.refused is not None:
            return TrialOutcome([], {}, config.shape.requests, self.trial_s, refused=self.refused)
        return TrialOutcome(verdicts, figures, config.shape.requests, self.trial_s)

    def close(self) -> None:
        self.closed += 1

    def describe(self) -> str:
        return f"test double: {len(self.ran)} configs run"


def with_fault(config, fault: Fault):
    """``config`` with ``fault`` added to its schedule (and its fatal kinds declared, as the strategies do)."""
    faults = FaultSchedule(config.faults.faults + (fault,))
    return dataclasses.replace(config, faults=faults, fatal_faults=fatal_kinds(faults))


def trial(requests: int, *faults: Fault):
    """The minimal trial with ``requests`` requests and ``faults`` (what the strategies shrink toward)."""
    config = with_requests(minimal_trial_config(TARGET, TIME_SCALE), requests)
    for fault in faults:
        config = with_fault(config, fault)
    return config


def big_failure(fault: Fault):
    """A first failure with what the reducer removes: 256 requests, an edge fault before ``fault``,
    abandoned polls, a ramp of arrivals, 64-token results."""
    config = trial(256, Fault("edge", "latency", {"latency": 50}, duration_s=0.5), fault)
    shape = dataclasses.replace(
        config.shape, abandon_polls=PollBehaviour(0.5, 45.0), arrival="ramp", arrival_span_s=1.0, result_tokens=64
    )
    return dataclasses.replace(config, shape=shape)


def configs_meeting(fault: Fault, limits: Limits = CI) -> st.SearchStrategy:
    """The suite's own ``trial_configs``, with ``fault`` added to about half of them.

    The known failure needs its fault, and a schedule drawn from a dozen
    kinds may not hold it in a few dozen examples; added by a drawn boolean,
    it is met in some examples whatever the seed, and shrinking can still
    drop it (the boolean shrinks to False), so its presence is the fake's
    condition, not the strategy's.
    """
    return st.builds(
        lambda config, add: with_fault(config, fault) if add else config,
        trial_configs(TARGET, TIME_SCALE, (), limits),
        st.booleans(),
    )


def quality_profile(**changes) -> Profile:
    """The ci profile with time bounds no test-double session reaches (unless ``changes`` set them)."""
    bounds = {"name": "quality", "property_s": 1e6, "shrink_s": 1e6, "session_s": 1e7}
    return dataclasses.replace(get_profile("ci"), **{**bounds, **changes})


def runner_clock(monkeypatch) -> FakeClock:
    """A :class:`FakeClock` the suite's runner reads as its ``time`` (the body of a test module's ``clock``
    fixture)."""
    from faultload.suite import runner as runner_mod

    clock = FakeClock()
    monkeypatch.setattr(runner_mod, "time", clock.as_time_module())
    return clock


def make_runner(root: Path, executor, profile: Profile | None = None, **kwargs) -> SuiteRunner:
    """A SuiteRunner on ``executor`` with its workspace at ``root`` and the default budgets."""
    return SuiteRunner(
        profile or quality_profile(),
        TARGET,
        (),
        Workspace(root),
        load_budgets(None),
        executor=executor,
        log=lambda message: None,
        **kwargs,
    )
