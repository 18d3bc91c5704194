"""twinkle-kit's adapter: what faultload needs of ``twinkle-kit`` (ModelScope's Tinker-compatible server), a
:class:`~faultload.targets.family.ServerFamily`.

Installed with ``--no-deps`` beside the modules its server imports on the sampling path with the mock sampler:
Ray Serve, its web stack, tinker's types (the release it pins) and the model libraries its modules import at
module level (transformers through peft, datasets, pillow); not its training stacks (megatron, vllm) nor
modelscope. torch is the suite's shared one. Launched through ``twinkle_launch.py``, inside the target's
Python: a Ray node of its own on 127.0.0.2 and twinkle's own ``ServerLauncher`` (its Tinker gateway and its
mock sampler as Ray Serve deployments, Serve's HTTP proxy on 127.0.0.1), the mock sampler's samples sent to
faultload's router (``twinkle_forwarding.py``). The server is a process tree (the launcher, Ray's GCS and
raylet, their workers): its handle sums the tree's metrics and pauses it whole. It has no regression
switches and no training; its candidate fix is ``twinkle_fixes.py``. Its futures contract is ``model.family.TWINKLE_CONTRACT``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from faultload.host import scratch
from faultload.host.processes import child_environment
from faultload.model.target import TargetSpec
from faultload.model.tokens import NONCE_INDEX_BITS, prompt_tokens
from faultload.targets.server import (
    BASE_MODEL,
    STARTUP_TIMEOUT_S,
    ServerHandle,
    ServerStartError,
    require_free_port,
    start_launcher,
)

LAUNCHER = Path(__file__).resolve().parent.parent / "twinkle_launch.py"
# What twinkle-kit 0.5.1's server imports with the mock sampler, found by importing its gateway, sampler and
# launcher in an empty venv until nothing was missing (its metadata names modelscope, vllm and megatron, which
# that path does not import).
SERVER_REQUIREMENTS = [
    "ray[serve]==2.60.0",
    "numpy>=2.0,<2.3",
    "omegaconf>=2.3,<3",
    "pydantic",
    "typer",
    "pyyaml",
    "packaging",
    "requests",
    "datasets",
    "fastapi",
    "grpcio",
    "grpcio-reflection",
    "uvicorn",
    "httpx",
    "pillow",
    "peft>=0.11,<=0.19.0",
]
# The tinker release each twinkle-kit release pins (its metadata's client extra: tinker==0.16.1).
TINKER_PINS = {"0.5.1": "tinker==0.16.1"}
DEFAULT_TINKER = "tinker==0.16.1"
# The launch log's line once the launcher has deployed every application and warmed the sampler, and its
# line when the warm-up sample failed (twinkle_patches.warm_up).
READY_LINE = "faultload-launch: warmed up"
WARM_UP_FAILED = "faultload-launch: warm-up sample failed:"
READY_POLL_S = 0.2
# The warm-up sample's nonce (the router answers only prompts that carry one): the last index of salt 0,
# which no trial reaches (it would take 16M requests), so its completion is never one of a trial's.
WARM_UP_NONCE = (1 << NONCE_INDEX_BITS) - 1
# A forward with no --forwarding-timeout-s waits this long for the router (SkyRL's forwarding default).
FORWARD_TIMEOUT_S = 2048.0


class TwinkleFamily:
    name = "twinkle"
    package = "twinkle-kit"
    needs_torch = True  # its model and data modules import torch at module level

    def requirements(self, spec: TargetSpec) -> list[str]:
        return SERVER_REQUIREMENTS + [TINKER_PINS.get(spec.version or "", DEFAULT_TINKER)]

    def own_install(self, spec: TargetSpec) -> list[str]:
        if spec.kind == "release":
            return ["--no-deps", f"twinkle-kit=={spec.version}"]
        return ["--no-deps", "-e", str(spec.path)]

    def launch(
        self, spec: TargetSpec, python: Path, run_dir: Path, port: int, router_url: str, **options: Any
    ) -> ServerHandle:
        return launch_twinkle(spec, python, run_dir, port, router_url, **options)


def launch_twinkle(
    spec: TargetSpec,
    python: Path,
    run_dir: Path,
    port: int,
    router_url: str,
    time_scale: float = 1.0,
    fixes: tuple[str, ...] = (),
    knobs: dict[str, Any] | None = None,
    profile_path: Path | None = None,
    env: dict[str, str] | None = None,
    while_starting: Callable[[], None] | None = None,
    **validated: Any,
) -> ServerHandle:
    """Start twinkle's gateway and mock sampler on a Ray node of their own and wait for /healthz.
    ``fixes``: the candidate fixes (``twinkle_fixes.py``). ``validated``: the stack's other options (regress, engine, null_backend, api_key: its gateway
    checks no key), whose values twinkle lacks ``TrialConfig.validate`` refused."""
    if profile_path is not None:
        raise ServerStartError(
            f"target {spec.text}: --profile-server profiles one process, and twinkle's server is a Ray cluster"
        )
    require_free_port(port)
    ray_temp = scratch.make("fl-tw-", "/tmp")  # Ray's socket paths must stay under 107 bytes
    knobs = knobs or {}
    launch_spec = {
        "router_url": router_url,
        "model": BASE_MODEL,
        "port": port,
        "time_scale": time_scale,
        "fixes": list(fixes),
        "forward_timeout_s": knobs.get("forwarding_timeout_s") or FORWARD_TIMEOUT_S,
        "ray_temp_dir": str(ray_temp),
        "warm_up_prompt": prompt_tokens(WARM_UP_NONCE),
    }
    spec_path = run_dir / "launch.json"
    spec_path.write_text(json.dumps(launch_spec, indent=1))
    server_env = {
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",  # nothing of the sampling path downloads; nothing may try
        # Ray: no usage report, no ~/.ray/auth_token, a worker's lines as it wrote them (no "(name pid=…)"
        # prefix, none dropped as a repeat), so each starts with its timestamp
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
        "RAY_DISABLE_WORKER_LOG_PREFIX": "1",
        "RAY_DEDUP_LOGS": "0",
    }
    child_env = child_environment({**(env or {}), **server_env}, drop=("PYTHONPATH", "RAY_ADDRESS"))
    try:
        handle = start_launcher(
            spec, [str(python), str(LAUNCHER), str(spec_path)], run_dir, child_env, port, while_starting, tree=True
        )
    except BaseException:
        scratch.remove(ray_temp)
        raise
    handle.scratch.append(ray_temp)
    try:
        _wait_deployed(handle)
    except BaseException:
        handle.stop(grace_s=3)
        raise
    return handle


def _wait_deployed(handle: ServerHandle) -> None:
    """Until the launcher says every application is deployed and its sampler warmed by one sample: twinkle's
    gateway answers /healthz as soon as it is deployed, before the sampler is, and the sampler starts its
    task worker at its first sample (both would land in the trial's baseline)."""
    assert handle.log_path is not None
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    for _ in range(int(STARTUP_TIMEOUT_S / READY_POLL_S) + 1):
        log = handle.log_path.read_text(errors="replace")
        if READY_LINE in log:
            return
        if WARM_UP_FAILED in log or not handle.alive() or time.monotonic() > deadline:
            break
        time.sleep(READY_POLL_S)
    raise ServerStartError(
        f"target {handle.spec.text}: /healthz answered, but its sampler did not answer the warm-up sample "
        f"(the launch log's {READY_LINE!r}) within {STARTUP_TIMEOUT_S:.0f}s; log tail:\n{handle.log_tail()}"
    )
