"""Launch a SkyRL Tinker API server for a trial, inside the target's own venv.

This file runs under the *target's* Python, not faultload's: it imports only
the standard library and what the SkyRL release itself imports. It is given a
JSON launch spec (path in argv[1]) and then:

1. aliases ``typing.TypedDict`` to ``typing_extensions.TypedDict`` (pydantic
   needs that on Python < 3.12, which SkyRL >= 0.4.0 declares but does not
   otherwise need);
2. imports the real ``skyrl.tinker.api`` module;
3. seeds ``EngineStateDB.inference_proxy_url`` with the router URL, as the
   engine would publish it once its vLLM is up;
4. replaces the engine subprocess (the only part of the app that needs GPUs)
   with a sleeper, or with the release's own engine loop over a null model
   backend (``engine: "null"``, ``skyrl_engine.py``), plus any regression
   switches / timer scaling the spec names — each patch point is checked and a
   missing one is a clear error — and, with ``pool_wait_s``, times the DB
   pool's checkouts (``skyrl_dbpool.py``: exhaustion written to the log);
5. runs the module's own ``if __name__ == "__main__":`` block (its argparse,
   its uvicorn settings: backlog, keep-alive, log config), so what is under
   test is the release's own start-up code.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import typing

import typing_extensions

if __package__:  # the harness's tests import this module as faultload.targets.skyrl_launch
    from . import launch_profile, skyrl_dbpool
    from .launch_logs import fail, installed_version
else:  # inside the target: beside this file, on sys.path (the script's own folder)
    import launch_profile
    import skyrl_dbpool
    from launch_logs import fail, installed_version

# sqlmodel and skyrl are imported in the functions below, after _alias_typed_dict
# has run: at the top they would load pydantic before the alias (step 1).


def _alias_typed_dict() -> None:
    typing.TypedDict = typing_extensions.TypedDict  # type: ignore[misc]


def _seed_router_url(db_path: str, router_url: str) -> None:
    from skyrl.tinker.db_models import EngineStateDB  # local import: pydantic, after the TypedDict alias
    from sqlmodel import Session, SQLModel, create_engine  # local import: pydantic, after the TypedDict alias

    engine = create_engine(f"sqlite:///{db_path}")
    SQLModel.metadata.create_all(engine)
    with Session(engine) as session:
        session.merge(EngineStateDB(singleton_id=1, inference_proxy_url=router_url))
        session.commit()
    engine.dispose()


def _sleeper_command() -> list[str]:
    """A stand-in engine: lives exactly as long as the API server process."""
    code = "import os, time\nppid = os.getppid()\nwhile os.getppid() == ppid:\n    time.sleep(0.5)\n"
    return [sys.executable, "-c", code]


def _engine_command(namespace: dict, spec: dict) -> typing.Callable:
    """What replaces the release's ``_build_uv_run_cmd_engine(parent_cmd, engine_config)``.

    ``sleeper`` (the default): no engine, so no training request completes. ``null``: the
    release's own engine loop with faultload's null model backend (``skyrl_engine.py``,
    beside this file), given the argv the release builds for its engine (``config_to_argv``).
    """
    engine = spec.get("engine", "sleeper")
    if engine == "sleeper":
        return lambda parent_cmd, engine_config: _sleeper_command()
    if engine != "null":
        fail(f"unknown engine {engine!r} (known: sleeper, null)")
    _require(namespace, "config_to_argv", "the engine's argv")
    to_argv = namespace["config_to_argv"]
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "skyrl_engine.py")
    # The engine inherits both: its backend's settings, and whose death ends it (this process's).
    os.environ["FAULTLOAD_NULL_BACKEND"] = json.dumps(spec.get("null_backend") or {})
    os.environ["FAULTLOAD_ENGINE_PARENT"] = str(os.getpid())
    return lambda parent_cmd, engine_config: [sys.executable, script, *to_argv(engine_config)]


def _require(namespace: dict, name: str, what: str) -> None:
    if name not in namespace:
        fail(f"patch point {name!r} ({what}) not found in skyrl.tinker.api of this version")


def _main_block(module) -> typing.Any:
    """The compiled body of the module's ``if __name__ == "__main__":`` block."""
    with open(module.__file__, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), module.__file__)
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
        ):
            body = ast.Module(body=node.body, type_ignores=[])
            return compile(body, module.__file__, "exec")
    fail("skyrl.tinker.api has no `if __name__ == '__main__':` block to run")


def _engine_flags(api, options: dict) -> list[str]:
    """``--field-name value`` for each EngineConfig option, refusing ones this version lacks."""
    fields = api.EngineConfig.model_fields
    flags = []
    for name, value in options.items():
        if name not in fields:
            fail(f"this skyrl version has no EngineConfig.{name} (so that knob cannot be set)")
        flags += [f"--{name.replace('_', '-')}", str(value)]
    return flags


def _version() -> str:
    return installed_version("skyrl")


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        spec = json.load(fh)
    _alias_typed_dict()
    import skyrl.tinker.api as api  # local import: the module under test, after the TypedDict alias
    from skyrl_patches import PatchError, apply_patches  # local import: beside this file, on sys.path from __main__

    namespace = api.__dict__
    _require(namespace, "_build_uv_run_cmd_engine", "engine subprocess command")
    namespace["_build_uv_run_cmd_engine"] = _engine_command(namespace, spec)
    try:
        applied = apply_patches(
            namespace, spec.get("regress", []), float(spec.get("time_scale", 1.0)), spec.get("fixes", [])
        )
    except PatchError as exc:
        fail(str(exc))
    if spec.get("pool_wait_s") is not None:
        _require(namespace, "create_async_engine", "the API's DB engine, whose pool checkouts are timed")
        applied.append(skyrl_dbpool.observe_pool_waits(namespace, float(spec["pool_wait_s"])))
    _seed_router_url(spec["db_path"], spec["router_url"])
    print(f"faultload-launch: patches {json.dumps(applied)}", file=sys.stderr, flush=True)

    code = _main_block(api)
    sys.argv = [api.__file__, *spec["argv"], *_engine_flags(api, spec.get("engine_options", {}))]
    print(f"faultload-launch: version {_version()}", file=sys.stderr, flush=True)
    with launch_profile.profiled(spec.get("profile_path")):
        exec(code, namespace)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
