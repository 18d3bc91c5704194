"""TuFT's adapter: what faultload needs of ``tuft`` (TuFT's Tinker API server), a :class:`~faultload.targets.family.ServerFamily`.

Installed with ``--no-deps`` beside the modules its server imports on the sampling path: its declared
dependencies (torch, vllm, ray, transformers, peft) are its training and in-process inference stacks, which a
trial does not run (``tuft_launch.py`` stands in for the two modules that import torch). Launched through
``tuft_launch.py``, inside the target's Python: its samples go to faultload's router (``tuft_forwarding.py``,
where TuFT would run vLLM) and its timers are scaled; the release's own ``tuft launch`` serves. It has no
regression switches and no training; its candidate fixes are ``tuft_fixes.py``. Its futures contract is ``model.family.TUFT_CONTRACT``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from faultload.host.processes import child_environment
from faultload.model.sdk import SDK_API_KEY
from faultload.model.target import TargetSpec
from faultload.targets.server import BASE_MODEL, ServerHandle, require_free_port, start_launcher

LAUNCHER = Path(__file__).resolve().parent.parent / "tuft_launch.py"
# What TuFT's server imports beside its own package, read from tuft 0.2.2's modules: its web stack, its
# config (omegaconf) and CLI (typer), its telemetry (imported at module level even when off: opentelemetry,
# nvidia-ml-py, psutil), tinker's own dependencies (tinker itself goes in --no-deps: the server imports its
# types and protobuf only, not the transformers its metadata names).
SERVER_REQUIREMENTS = [
    "fastapi>=0.133.0,<0.137.0",
    "uvicorn[standard]>=0.38.0",
    "httpx>=0.28.1",
    "numpy>=2.0.0",
    "omegaconf>=2.3.0",
    "typer>=0.20.1",
    "psutil>=5.9.0",
    "nvidia-ml-py>=13.0.0",
    "protobuf>=4.21.0",
    "opentelemetry-api>=1.20.0",
    "opentelemetry-sdk>=1.20.0",
    "opentelemetry-instrumentation-fastapi>=0.41b0",
    "opentelemetry-instrumentation-logging>=0.41b0",
    "opentelemetry-exporter-otlp>=1.20.0",
    "anyio",
    "distro",
    "sniffio",
    "pydantic",
    "typing-extensions",
    "zstandard",
    "orjson",
    "aiohttp",  # faultload's forwarding backend's client (tuft_forwarding.py)
]
# The tinker release each TuFT release pins (its metadata: tinker>=0.25,<0.26).
TINKER_PINS = {"0.2.2": "tinker>=0.25,<0.26"}
DEFAULT_TINKER = "tinker>=0.25,<0.26"
# A forward with no --forwarding-timeout-s waits this long for the router (SkyRL's forwarding default).
FORWARD_TIMEOUT_S = 2048.0
USER_ID = "faultload"
MAX_MODEL_LEN = 40960  # BASE_MODEL's context (its config's max_position_embeddings); TuFT only reports it


class TuftFamily:
    name = "tuft"
    package = "tuft"
    needs_torch = False  # tuft_launch.py stands in for the two modules that import it

    def requirements(self, spec: TargetSpec) -> list[str]:
        return SERVER_REQUIREMENTS

    def own_install(self, spec: TargetSpec) -> list[str]:
        tinker = TINKER_PINS.get(spec.version or "", DEFAULT_TINKER)
        if spec.kind == "release":
            return ["--no-deps", f"tuft=={spec.version}", tinker]
        return ["--no-deps", "-e", str(spec.path), tinker]

    def launch(
        self, spec: TargetSpec, python: Path, run_dir: Path, port: int, router_url: str, **options: Any
    ) -> ServerHandle:
        return launch_tuft(spec, python, run_dir, port, router_url, **options)


def launch_tuft(
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
    """Start ``tuft launch`` serving BASE_MODEL for sampling, authorizing ``api_key`` (the one faultload's clients
    send, unless a test runs it as a server someone else keys), with
    the candidate ``fixes`` (``tuft_fixes.py``), under cProfile into ``profile_path`` when given, and wait for
    /healthz. ``validated``: the stack's other options (regress, engine, null_backend), whose values TuFT lacks
    ``TrialConfig.validate`` refused."""
    require_free_port(port)
    config_path = run_dir / "tuft_config.json"  # JSON is YAML: TuFT reads it with OmegaConf
    config_path.write_text(
        json.dumps(
            {
                "checkpoint_dir": str(run_dir / "checkpoints"),
                "authorized_users": {api_key: USER_ID},
                "supported_models": [
                    {
                        "model_name": BASE_MODEL,
                        "model_path": str(run_dir / "model"),
                        "max_model_len": MAX_MODEL_LEN,
                        "capabilities": ["sampling"],
                    }
                ],
            },
            indent=1,
        )
    )
    knobs = knobs or {}
    launch_spec = {
        "router_url": router_url,
        "time_scale": time_scale,
        "fixes": list(fixes),
        "profile_path": str(profile_path) if profile_path else None,
        "forward_timeout_s": knobs.get("forwarding_timeout_s") or FORWARD_TIMEOUT_S,
        "forward_max_connections": knobs.get("forwarding_max_connections"),
        "argv": ["launch", "--host", "127.0.0.1", "--port", str(port), "--config", str(config_path)],
    }
    spec_path = run_dir / "launch.json"
    spec_path.write_text(json.dumps(launch_spec, indent=1))
    child_env = child_environment(
        {**(env or {}), "PYTHONUNBUFFERED": "1", "TUFT_HOME": str(run_dir / "tuft-home")}, drop=("PYTHONPATH",)
    )
    return start_launcher(spec, [str(python), str(LAUNCHER), str(spec_path)], run_dir, child_env, port, while_starting)
