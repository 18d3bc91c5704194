"""What one trial is, as plain data: ``TrialConfig`` and the stack settings it carries.

A repro file and a trial bundle store a ``TrialConfig`` (``faultload.model.codec``);
``faultload.run.trial.run_trial`` runs one.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

from faultload.model.family import TRAITS
from faultload.model.faults import FaultSchedule
from faultload.model.router import RouterConfig
from faultload.model.shape import LoadShape
from faultload.model.switches import unknown_switch
from faultload.model.target import TargetSpec, parse_target, require_loopback
from faultload.model.watchdog import WatchdogLimits

# The phases of a trial's wall (``TrialResult.phases_s``, the report's ``phases_s``), in the order they
# run; they add up to ``wall_s``. What happens around the wall is named after them: ``judge`` (the
# checkers, after the trial) everywhere, and in the suite ``stack_ready`` (the shared stack checked,
# waited on to its fd baseline, or (re)started, before the trial).
TRIAL_PHASES = ("stack_start", "session_open", "workers_start", "load", "gather", "hold", "clean_up", "other")


@dataclass(frozen=True)
class ServerKnobs:
    """The server's own forwarding and store settings, passed through when it has them."""

    forwarding_max_connections: int | None = None
    forwarding_timeout_s: float | None = None
    retrieved_ttl_s: float | None = None


@dataclass(frozen=True)
class StackConfig:
    """What is fixed for a stack's whole life."""

    spec: TargetSpec  # the target, as its TrialConfig parsed it
    regress: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()
    knobs: ServerKnobs = dataclasses.field(default_factory=ServerKnobs)
    time_scale: float = 1.0
    proxies: bool = False
    server_pid: int | None = None  # for url= targets
    server_port: int = 0
    profile_server: str | None = None
    keep_run_dir: bool = False
    engine: str = "sleeper"
    engine_s_per_token: float = 0.0

    @property
    def target(self) -> str:
        return self.spec.text


# What runs as the server's engine subprocess (targets/skyrl_launch.py): nothing that completes a
# training request, or SkyRL's own engine loop over faultload's null model backend.
ENGINES = ("sleeper", "null")


@dataclass(frozen=True)
class TrialConfig:
    """Everything one trial needs, as plain data (the repro file stores it)."""

    target: str
    shape: LoadShape = field(default_factory=LoadShape)
    router: RouterConfig = field(default_factory=RouterConfig)
    regress: tuple[str, ...] = ()
    # Candidate fixes applied in the launched server (skyrl_patches.FIXES).
    fixes: tuple[str, ...] = ()
    faults: FaultSchedule = field(default_factory=FaultSchedule)
    # Route load and forwards through Toxiproxy: "on", "off", or "auto" (on when faults are scheduled).
    proxies: str = "auto"
    knobs: ServerKnobs = field(default_factory=ServerKnobs)
    allow_remote: bool = False
    server_pid: int | None = None
    server_port: int = 0
    max_wall_s: float = 1800.0  # the load stops here whatever is left
    drain_s: float = 10.0  # after the load, wait up to this for fds to settle
    # After the drain, keep sampling the idle server this long (seconds): what it still holds once its TTLs and
    # a sweep have passed (releases_results); 0: no hold.
    hold_s: float = 0.0
    profile_server: str | None = None
    keep_run_dir: bool = False
    watchdog: WatchdogLimits = field(default_factory=WatchdogLimits)
    early_stop: bool = True  # stop the trial when the watchdog recognises a collapse
    # Fault kinds ("crash" or "router:crash") whose victims may give up without it being a loss.
    fatal_faults: tuple[str, ...] = ()
    # Send the load to the server's own port even when the stack has an edge
    # proxy: Toxiproxy makes two TCP connections of each client connection,
    # so a race on the client's own connection to the server (a keep-alive
    # close meeting a reused connection) is a different race through it.
    direct_edge: bool = False
    # The engine a launched server runs (ENGINES); training traffic needs "null". Its compute time
    # per target token of a batch, in seconds (the null backend blocks its loop that long).
    engine: str = "sleeper"
    engine_s_per_token: float = 0.0

    @functools.cached_property
    def spec(self) -> TargetSpec:
        """The target, parsed once (ValueError, one line, when it is not a target)."""
        return parse_target(self.target)

    def validate(self) -> TargetSpec:
        spec = self.spec
        self.shape.validate()
        self.router.validate()
        if spec.kind == "url":
            require_loopback(spec.url or "", self.allow_remote)
            if self.regress or self.fixes:
                raise ValueError("--regress/--fix need a target faultload launches (skyrl==X.Y.Z or skyrl@PATH)")
        if not isinstance(self.direct_edge, bool):
            raise ValueError("direct_edge must be true or false")
        if self.direct_edge and any(f.link == "edge" for f in self.faults.faults):
            raise ValueError("direct_edge leaves the edge proxy out: edge faults cannot apply")
        if self.proxies not in ("on", "off", "auto"):
            raise ValueError("proxies must be on, off or auto")
        if self.proxies == "off" and self.faults.faults:
            raise ValueError(
                "--proxies off leaves no fault stack: edge/backend faults need Toxiproxy, router and process faults its scheduler"
            )
        if spec.kind == "url" and any(f.link != "edge" for f in self.faults.faults):
            raise ValueError("a url= target's router and backend are not ours: only edge faults apply")
        if not 0 < self.max_wall_s < math.inf:
            raise ValueError("max_wall_s must be > 0 and finite")
        if (
            isinstance(self.hold_s, bool)
            or not isinstance(self.hold_s, (int, float))
            or not 0 <= self.hold_s < math.inf
        ):
            raise ValueError(f"hold_s must be a number >= 0 and finite, got {self.hold_s!r}")
        problem = unknown_switch(self.regress, self.fixes)
        if problem:
            raise ValueError(problem)
        if spec.kind != "url":
            self._validate_switches(spec)
        for name, value in dataclasses.asdict(self.knobs).items():
            if value is not None and not 0 < value < math.inf:
                raise ValueError(f"{name} must be > 0 and finite, got {value}")
            if value is not None and spec.kind != "url" and name not in TRAITS[spec.family].knobs:
                raise ValueError(
                    f"{spec.text} has no setting {name} (its launcher passes {', '.join(TRAITS[spec.family].knobs)})"
                )
        if not 0 <= self.server_port < 65536:
            raise ValueError("server_port must be in [0, 65535]")
        self._validate_engine(spec)
        return spec

    def _validate_switches(self, spec: TargetSpec) -> None:
        """Each switch is one the target's family has (model.family.TRAITS; an unknown name was refused before)."""
        traits = TRAITS[spec.family]
        for names, known, what in ((self.regress, traits.regressions, "regression"), (self.fixes, traits.fixes, "fix")):
            for name in names:
                if name not in known:
                    raise ValueError(
                        f"{spec.text} has no {what} switch {name!r} "
                        f"({what} switches it has: {', '.join(known) or 'none'})"
                    )

    def _validate_engine(self, spec: TargetSpec) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if (
            isinstance(self.engine_s_per_token, bool)
            or not isinstance(self.engine_s_per_token, (int, float))
            or not 0 <= self.engine_s_per_token <= 1
        ):
            raise ValueError(f"engine_s_per_token must be a number in [0, 1], got {self.engine_s_per_token!r}")
        if spec.kind == "url":
            if self.engine != "sleeper" or self.engine_s_per_token:
                raise ValueError("a url= target's engine is its own: --engine applies to targets faultload launches")
            return
        if self.engine not in TRAITS[spec.family].engines:
            raise ValueError(
                f"engine {self.engine} is not one {spec.text}'s launcher runs "
                f"({', '.join(TRAITS[spec.family].engines)})"
            )
        if self.engine_s_per_token and self.engine != "null":
            raise ValueError("engine_s_per_token needs engine null (the sleeper runs no step)")
        if self.shape.training.enabled and self.engine != "null":
            raise ValueError("training traffic needs engine null (the sleeper engine completes no training request)")

    @property
    def uses_proxies(self) -> bool:
        return self.proxies == "on" or (self.proxies == "auto" and bool(self.faults.faults))

    def stack_config(self) -> StackConfig:
        """The part of this config a reusable stack is made of."""
        return StackConfig(
            spec=self.spec,
            regress=self.regress,
            fixes=self.fixes,
            knobs=self.knobs,
            time_scale=self.shape.time_scale,
            proxies=self.uses_proxies,
            server_pid=self.server_pid,
            server_port=self.server_port,
            profile_server=self.profile_server,
            keep_run_dir=self.keep_run_dir,
            engine=self.engine,
            engine_s_per_token=self.engine_s_per_token,
        )
