"""What faultload changes in a launched hatchery-core server, each patch point checked (a missing one: exit 3).

Runs under the target's Python, imported by ``hatchery_launch.py``:

- sampling: the scripted worker's job runner (``StubWorker._execute``) sends a ``sample`` job to faultload's
  router (``hatchery_forwarding.py``) where a GPU worker would run the model; every other job is the stub's;
- loopback: ``hatchery.core.local_dev`` binds 0.0.0.0 by a literal; every uvicorn server of the process binds
  127.0.0.1 instead (faultload's traffic stays on loopback);
- logs: every line gets a timestamp (``asctime - level - logger: message``, as SkyRL writes): Python logging's,
  uvicorn's, and structlog's, which hatchery logs through and which is routed into Python logging;
- timers, times the trial's scale: the poll hold (``Config.max_job_timeout_seconds``, 600 s) and the future
  registry's age limit (``_REGISTRY_MAX_AGE_S``, 3600 s). The registry's size cap (100,000) is a count, not
  scaled;
- the candidate fixes the spec names (``hatchery_fixes.FIXES``).
"""

from __future__ import annotations

import hatchery.core.local_dev as local_dev
import hatchery.core.tinker_compat as tinker_compat
import hatchery_fixes
import hatchery_forwarding
import msgpack
import structlog
import uvicorn
import uvicorn.config
from hatchery.core.stub_worker import StubWorker
from launch_logs import fail, installed_version, timestamp_logs

LOOPBACK = "127.0.0.1"


def apply(spec: dict) -> list[str]:
    """Every patch the launch spec asks for; what was changed, for the log."""
    _forward_samples(hatchery_forwarding.RouterSampler(spec["router_url"], spec["model"], spec["forward_timeout_s"]))
    _bind_loopback()
    _timestamp_logs()
    applied = ["sampling -> router", "uvicorn on 127.0.0.1", "timestamped logs", *_scale_timers(spec["time_scale"])]
    modules = {"tinker_compat": tinker_compat, "local_dev": local_dev}
    return applied + [hatchery_fixes.FIXES[name](modules) for name in spec.get("fixes", [])]


def _forward_samples(sampler: hatchery_forwarding.RouterSampler) -> None:
    execute = getattr(StubWorker, "_execute", None)
    if execute is None or not hasattr(StubWorker, "_load_or_attach"):
        fail("patch point StubWorker._execute / _load_or_attach (the scripted worker's job runner) not found")

    async def _execute(self, job):
        if job.operation != "sample":
            return await execute(self, job)
        await self._load_or_attach(job.session_id)
        payload = msgpack.unpackb(job.payload, raw=False) if job.payload else {}
        return await sampler.sample(payload)

    StubWorker._execute = _execute


def _bind_loopback() -> None:
    init = uvicorn.Config.__init__

    def __init__(self, app, *args, **kwargs):
        kwargs["host"] = LOOPBACK
        init(self, app, *args, **kwargs)

    uvicorn.Config.__init__ = __init__


def _timestamp_logs() -> None:
    """Python logging's and uvicorn's lines (``launch_logs``), and structlog's, routed into Python logging."""
    timestamp_logs()
    structlog.configure(
        processors=[
            structlog.stdlib.add_log_level,
            structlog.processors.format_exc_info,
            structlog.processors.KeyValueRenderer(key_order=["event"]),
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
    )


def _scale_timers(scale: float) -> list[str]:
    """The poll hold and the registry's age limit, times ``scale``; what was changed."""
    build = getattr(local_dev, "_build_config", None)
    age = getattr(tinker_compat, "_REGISTRY_MAX_AGE_S", None)
    if build is None or not isinstance(age, float):
        fail("patch points local_dev._build_config / tinker_compat._REGISTRY_MAX_AGE_S not found")

    def _build_config(api_key: str):
        config = build(api_key)
        config.max_job_timeout_seconds = config.max_job_timeout_seconds * scale
        return config

    local_dev._build_config = _build_config
    tinker_compat._REGISTRY_MAX_AGE_S = age * scale
    hold = local_dev.Config.__dataclass_fields__["max_job_timeout_seconds"].default
    return [f"poll hold {hold:g} s -> {hold * scale:g} s", f"future registry age {age:g} s -> {age * scale:g} s"]


def version() -> str:
    return installed_version("hatchery-core")


def serve() -> None:
    """The release's own local server (``hatchery-local-dev``), which runs until it is stopped."""
    local_dev.main()
