"""SkyRL's adapter: what faultload needs of ``skyrl.tinker.api`` (the first :class:`~faultload.targets.family.ServerFamily`).

Installed with ``--no-deps`` (its declared dependencies pull training stacks no trial runs) beside the modules
its sampling path imports and the torch every target venv shares; launched through ``skyrl_launch.py``, which
runs inside the target's Python with the engine stubbed (``skyrl_engine.py``), the router seeded as its
external inference, the regression and fix switches applied (``skyrl_patches.py``) and its timers scaled.
Its futures contract is ``model.family.SKYRL_CONTRACT``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from faultload.host.processes import child_environment
from faultload.model.target import TargetSpec
from faultload.targets.server import BASE_MODEL, ServerHandle, require_free_port, start_launcher
from faultload.targets.versions import checkout_version

LAUNCHER = Path(__file__).resolve().parent.parent / "skyrl_launch.py"
# A checkout that waits this long for one of the API's DB connections (SQLAlchemy's 5 + 10, whose own
# timeout is 30 s) is logged as pool exhaustion: the server's queries take milliseconds, so a second's
# wait is a pool with no connection to give, and a heartbeat (the SDK's 10 s timeout) starving behind it.
POOL_WAIT_S = 1.0
# glibc's mmap threshold held at its initial 128 KiB: left dynamic, it rises to the size of the first large
# block freed, and every later result of that size is carved from the heap, which glibc seldom gives back, so
# a store that released its results looked like one that kept them (releases_results: 0.60 MiB held per MiB
# delivered, clean 0.4.0, against 1.29 for a store that never evicts; held here, 0.12 against 1.12;
# bench/release_rss.py, docs/results/measurements.md). An allocator setting, not a change to the server.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}

# faultload's names for the server's knobs -> SkyRL EngineConfig fields.
ENGINE_KNOBS = {
    "forwarding_max_connections": "forwarding_inference_max_connections",
    "forwarding_timeout_s": "forwarding_inference_timeout_sec",
    "retrieved_ttl_s": "external_future_retrieved_ttl_sec",
}

# The release's own `tinker` extra (fastapi[standard] brings uvicorn with uvloop
# and httptools, as a production install has them) plus what skyrl.tinker.api
# imports on the sampling path from skyrl's base deps. skyrl itself goes in
# --no-deps: its declared deps pull training stacks we do not run.
SERVER_REQUIREMENTS = [
    "fastapi[standard]",
    "sqlmodel",
    "sqlalchemy[asyncio]",
    "aiosqlite",
    "asyncpg",
    "psycopg2-binary",
    "psutil",
    "zstandard",
    "cloudpathlib",
    "rich",
    "aiohttp",
    "orjson",
    "httpx",
    "numpy",
    "typing_extensions",
    "xxhash",
]
# Per-release pins taken from each release's own metadata (its `tinker` extra
# and its transformers range).
RELEASE_PINS = {
    "0.4.0": ["tinker>=0.25,<0.26", "transformers>=5.6.1,<=5.16.1"],
    "0.3.0": ["tinker>=0.25,<0.26", "transformers>=5.6.1,<=5.8.0"],
}
DEFAULT_PINS = ["tinker>=0.25,<0.26"]


class SkyrlFamily:
    name = "skyrl"
    package = "skyrl"
    needs_torch = True  # imported at module level on the sampling path

    def requirements(self, spec: TargetSpec) -> list[str]:
        """A release's pins; a checkout's are those of the release it states (its own version, else none)."""
        version = spec.version if spec.kind == "release" else checkout_version(spec.path) if spec.path else None
        return SERVER_REQUIREMENTS + RELEASE_PINS.get(version or "", DEFAULT_PINS)

    def own_install(self, spec: TargetSpec) -> list[str]:
        """pip arguments installing the release or checkout itself (Python >= 3.12 declared, runs on 3.11)."""
        if spec.kind == "release":
            return ["--ignore-requires-python", "--no-deps", f"skyrl=={spec.version}"]
        return ["--ignore-requires-python", "--no-deps", "-e", str(spec.path)]

    def launch(
        self, spec: TargetSpec, python: Path, run_dir: Path, port: int, router_url: str, **options: Any
    ) -> ServerHandle:
        return launch_skyrl(spec, python, run_dir, port, router_url, **options)


def launch_skyrl(
    spec: TargetSpec,
    python: Path,
    run_dir: Path,
    port: int,
    router_url: str,
    regress: tuple[str, ...] = (),
    time_scale: float = 1.0,
    fixes: tuple[str, ...] = (),
    knobs: dict[str, Any] | None = None,
    profile_path: Path | None = None,
    env: dict[str, str] | None = None,
    while_starting: Callable[[], None] | None = None,
    engine: str = "sleeper",
    null_backend: dict[str, float] | None = None,
    pool_wait_s: float | None = POOL_WAIT_S,
) -> ServerHandle:
    """Start the real ``skyrl.tinker.api`` app (non-colocated megatron) and wait for /healthz
    (``server.start_launcher``: ``while_starting`` overlaps its start-up, ~2.8 s of imports, patches and the DB seed).

    ``engine``: ``sleeper`` (no engine: training requests never complete) or
    ``null`` (the release's engine loop, faultload's null backend; ``null_backend``
    may set its ``seconds_per_token``) — see ``skyrl_engine.py``. ``pool_wait_s``: the
    server's DB pool checkouts that wait this long for a connection are written
    to its log as ``DB pool exhausted`` (``skyrl_dbpool.py``; None: not timed).
    """
    require_free_port(port)
    db_path = run_dir / "tinker.db"
    argv = [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--base-model",
        BASE_MODEL,
        "--backend",
        "megatron",
        "--backend-config",
        json.dumps({"trainer.placement.colocate_all": False}),
        "--database-url",
        f"sqlite:///{db_path}",
        "--checkpoints-base",
        str(run_dir / "checkpoints"),
    ]
    engine_options = {ENGINE_KNOBS[k]: v for k, v in (knobs or {}).items() if v is not None}
    launch_spec = {
        "db_path": str(db_path),
        "router_url": router_url,
        "regress": list(regress),
        "fixes": list(fixes),
        "time_scale": time_scale,
        "argv": argv,
        "engine_options": engine_options,
        "profile_path": str(profile_path) if profile_path else None,
        "engine": engine,
        "null_backend": null_backend or {},
        "pool_wait_s": pool_wait_s,
    }
    spec_path = run_dir / "launch.json"
    spec_path.write_text(json.dumps(launch_spec, indent=1))
    child_env = child_environment(
        {**MALLOC_ENV, **(env or {}), "COLUMNS": "250", "PYTHONUNBUFFERED": "1"}, drop=("PYTHONPATH",)
    )
    return start_launcher(spec, [str(python), str(LAUNCHER), str(spec_path)], run_dir, child_env, port, while_starting)
