"""What faultload changes in a launched TuFT server, each patch point checked (a missing one: exit 3, one line).

Runs under the target's Python, imported by ``tuft_launch.py`` once its torch stand-ins are in place:

- sampling: TuFT's one sampling-backend factory (``BaseSamplingBackend.create_backend``) builds
  ``tuft_forwarding.RouterSamplingBackend``, so each sample goes to faultload's router where TuFT would run
  its in-process vLLM engine;
- logs: every line gets a timestamp (Python logging's ``asctime - level - logger: message``, as SkyRL writes).
  TuFT's ``logging.basicConfig`` and uvicorn's formats have none, and a line the checker cannot place in the
  trial cannot be told apart from a fault's;
- timers, times the trial's scale: ``FutureStore.retrieve``'s poll hold (120 s) and ``SequenceExecutor``'s
  ordering timeout (900 s);
- the candidate fixes the spec names (``tuft_fixes.FIXES``; their model changes were made before TuFT was
  imported, by ``tuft_launch.py``).
"""

from __future__ import annotations

import inspect
import sys

import tuft.cli
import tuft.futures as futures
import tuft.persistence
import tuft.sampling_controller
import tuft.sequence_executor as sequence_executor
import tuft_fixes
import tuft_forwarding
from launch_logs import fail, installed_version, timestamp_logs
from tuft.backends.base_backend import BaseSamplingBackend
from tuft.cli import main as tuft_main


def apply(spec: dict) -> list[str]:
    """Every patch the launch spec asks for; what was changed, for the log."""
    if not hasattr(BaseSamplingBackend, "create_backend"):
        fail("patch point BaseSamplingBackend.create_backend (the sampling backend factory) not found")
    tuft_forwarding.install(
        BaseSamplingBackend, spec["router_url"], float(spec["forward_timeout_s"]), spec.get("forward_max_connections")
    )
    timestamp_logs()
    applied = ["sampling -> router", "timestamped logs", *_scale_timers(float(spec.get("time_scale", 1.0)))]
    modules = {
        "future_store": futures.FutureStore,
        "cli": tuft.cli,
        "persistence": tuft.persistence,
        "sampling_controller": tuft.sampling_controller,
        "sequence_executor": sequence_executor,
    }
    return applied + [tuft_fixes.FIXES[name](modules) for name in spec.get("fixes", [])]


def _scale_timers(scale: float) -> list[str]:
    """The poll hold and the sequence executor's timeout, times ``scale``; what was changed."""
    kwdefaults = futures.FutureStore.retrieve.__kwdefaults__ or {}
    if "timeout" not in kwdefaults:
        fail("patch point FutureStore.retrieve(*, timeout=...) (the poll hold) not found in this tuft version")
    hold = kwdefaults["timeout"]
    kwdefaults["timeout"] = hold * scale
    init = sequence_executor.SequenceExecutor.__init__
    if list(inspect.signature(init).parameters) != ["self", "timeout"] or not init.__defaults__:
        fail(
            "patch point SequenceExecutor.__init__(timeout=...) (the sampling session's ordering timeout) "
            "not found in this tuft version"
        )
    ordering = init.__defaults__[0]
    init.__defaults__ = (ordering * scale,)
    return [f"poll hold {hold:g} s -> {hold * scale:g} s", f"sequence timeout {ordering:g} s -> {ordering * scale:g} s"]


def version() -> str:
    return installed_version("tuft")


def serve(argv: list[str]) -> None:
    """The release's own CLI (``tuft launch ...``), which runs until the server stops."""
    sys.argv = ["tuft", *argv]
    tuft_main()
