"""hatchery-core's adapter: what faultload needs of ``hatchery-core`` (Axolotl's Tinker API server), a
:class:`~faultload.targets.family.ServerFamily`.

Installed with ``--no-deps`` (and ``--ignore-requires-python``: it declares Python >= 3.12 and runs on 3.11)
beside the modules its local server imports without a GPU: its declared torch, transformers and peft are the
GPU worker's, which a trial does not run. Launched through ``hatchery_launch.py``, inside the target's Python:
the release's own local server (``python -m hatchery.core.local_dev``) with its scripted worker, whose sample
jobs go to faultload's router (``hatchery_forwarding.py``). It has no regression switches and no training; its
candidate fixes are ``hatchery_fixes.py``. Its futures
contract is ``model.family.HATCHERY_CONTRACT``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from faultload.host.processes import child_environment
from faultload.model.sdk import SDK_API_KEY
from faultload.model.target import TargetSpec
from faultload.targets.server import BASE_MODEL, ServerHandle, require_free_port, start_launcher

LAUNCHER = Path(__file__).resolve().parent.parent / "hatchery_launch.py"
# What hatchery-core 0.3.0's local server imports without a GPU (read from its modules: the gateway's web
# stack, its queue's msgpack, its structlog), and faultload's forwarding client (aiohttp).
SERVER_REQUIREMENTS = [
    "fastapi>=0.110",
    "uvicorn[standard]>=0.29",
    "pydantic>=2.6",
    "msgpack>=1.0",
    "structlog>=24.1",
    "httpx>=0.27",
    "aiohttp",
    "protobuf>=4.21",  # the proto-sample-results fix encodes with tinker's proto module (tinker goes in --no-deps)
]
# The tinker release whose proto module the proto-sample-results fix loads (the one faultload's SDK client runs).
TINKER = "tinker>=0.25,<0.26"
# A forward with no --forwarding-timeout-s waits this long for the router (SkyRL's forwarding default).
FORWARD_TIMEOUT_S = 2048.0


class HatcheryFamily:
    name = "hatchery"
    package = "hatchery-core"
    needs_torch = False  # only the GPU worker imports it, which a trial does not run

    def requirements(self, spec: TargetSpec) -> list[str]:
        return SERVER_REQUIREMENTS

    def own_install(self, spec: TargetSpec) -> list[str]:
        if spec.kind == "release":
            return ["--no-deps", "--ignore-requires-python", f"hatchery-core=={spec.version}", TINKER]
        return ["--no-deps", "--ignore-requires-python", "-e", str(spec.path), TINKER]

    def launch(
        self, spec: TargetSpec, python: Path, run_dir: Path, port: int, router_url: str, **options: Any
    ) -> ServerHandle:
        return launch_hatchery(spec, python, run_dir, port, router_url, **options)


def launch_hatchery(
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
    api_key: str = SDK_API_KEY,
    **validated: Any,
) -> ServerHandle:
    """Start hatchery's local server with its scripted worker, authorizing ``api_key``, with the candidate
    ``fixes`` (``hatchery_fixes.py``), under cProfile into ``profile_path`` when given, and wait for /healthz.
    ``validated``: the stack's other options (regress, engine, null_backend), whose values hatchery lacks ``TrialConfig.validate`` refused."""
    require_free_port(port)
    knobs = knobs or {}
    launch_spec = {
        "router_url": router_url,
        "model": BASE_MODEL,
        "time_scale": time_scale,
        "fixes": list(fixes),
        "profile_path": str(profile_path) if profile_path else None,
        "forward_timeout_s": knobs.get("forwarding_timeout_s") or FORWARD_TIMEOUT_S,
    }
    spec_path = run_dir / "launch.json"
    spec_path.write_text(json.dumps(launch_spec, indent=1))
    server_env = {
        "PYTHONUNBUFFERED": "1",
        "HATCHERY_DEV_PORT": str(port),
        "HATCHERY_DEV_API_KEY": api_key,
        "HATCHERY_DEV_BASE_MODEL": BASE_MODEL,
        "HATCHERY_DEV_NO_GPU": "1",
        "HF_HUB_OFFLINE": "1",  # nothing of the sampling path downloads; nothing may try
    }
    child_env = child_environment({**(env or {}), **server_env}, drop=("PYTHONPATH",))
    return start_launcher(spec, [str(python), str(LAUNCHER), str(spec_path)], run_dir, child_env, port, while_starting)
