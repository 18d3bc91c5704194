"""Targets: what setup installed, and launching the real installed SkyRL releases.

The tests start the real 0.4.0/0.3.0 servers through ``launch_skyrl`` (with a fake router URL nobody calls) and
check they answer /healthz, take or refuse each switch, and leave no process behind. Install bookkeeping, server
handles and the patch switches on a stand-in namespace are in ``tests/unit/test_targets.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import psutil
import pytest
from conftest import TARGETS, require_target, wait_until

from faultload.host.network import http_get_json, pick_free_port
from faultload.model.target import parse_target
from faultload.targets import install, skyrl_patches
from faultload.targets.families.skyrl import launch_skyrl
from faultload.targets.server import ServerHandle, ServerStartError


@pytest.mark.integration  # it checks what setup installed: make test runs the unit tier while setup installs
@pytest.mark.parametrize("version", ["0.4.0", "0.3.0"])
def test_installed_targets_have_their_stamp_and_shared_torch(version):
    require_target(version)
    venv = TARGETS / f"skyrl-{version}"
    stamp = json.loads((venv / install.STAMP).read_text())
    assert stamp["target"] == f"skyrl=={version}"
    pth = install.site_packages(venv) / "_faultload_shared_torch.pth"
    assert Path(pth.read_text().strip()).is_dir()


# --------------------------------------------------------------------------- the real servers


def _launch(tmp_path: Path, version: str, **kwargs) -> ServerHandle:
    spec = parse_target(f"skyrl=={version}")
    python = install.target_python(TARGETS, spec)
    return launch_skyrl(spec, python, tmp_path, pick_free_port(), "http://127.0.0.1:9", **kwargs)


def _group_gone(pid: int) -> bool:
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pid and proc.status() != psutil.STATUS_ZOMBIE:
                return False
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return True


@pytest.mark.integration
@pytest.mark.parametrize("version, scale_note", [("0.4.0", "x0.5"), ("0.3.0", "nothing to scale")])
def test_launch_real_release(tmp_path: Path, version: str, scale_note: str):
    require_target(version)
    handle = _launch(tmp_path, version, time_scale=0.5)
    try:
        assert handle.version == version
        _, body = http_get_json(handle.healthz_url, timeout_s=10.0)
        assert body is not None
        log = (tmp_path / "server.log").read_text()
        assert "faultload-launch: patches" in log and scale_note in log
        server = psutil.Process(handle.pid)
        assert server.is_running()
        assert len(server.children()) >= 1  # the engine sleeper stands in for the GPU engine
    finally:
        handle.stop()
    assert wait_until(lambda: _group_gone(handle.pid), timeout_s=20.0)


@pytest.mark.integration
def test_what_runs_while_the_server_starts_overlaps_it_and_its_failure_stops_the_server(tmp_path: Path):
    """The stack starts the router and Toxiproxy in ``while_starting``: it runs before /healthz answers,
    and when it fails the spawned server is stopped, not left behind."""
    require_target("0.4.0")
    seen: list[bool] = []
    spawned: list[int] = []

    def starting() -> None:
        spawned.extend(p.pid for p in psutil.Process().children() if "skyrl_launch" in " ".join(p.cmdline()))
        seen.append(http_get_json(f"http://127.0.0.1:{port}/api/v1/healthz", timeout_s=1.0)[1] is None)
        raise RuntimeError("the router did not start")

    spec = parse_target("skyrl==0.4.0")
    port = pick_free_port()
    with pytest.raises(RuntimeError, match="the router did not start"):
        launch_skyrl(
            spec, install.target_python(TARGETS, spec), tmp_path, port, "http://127.0.0.1:9", while_starting=starting
        )
    assert seen == [True]  # the server was spawned, and not yet answering
    assert len(spawned) == 1 and wait_until(lambda: _group_gone(spawned[0]), timeout_s=20.0)


@pytest.mark.integration
def test_launch_with_the_plain_tracebacks_fix(tmp_path: Path):
    require_target("0.4.0")
    handle = _launch(tmp_path, "0.4.0", fixes=("plain-tracebacks",))
    try:
        log = (tmp_path / "server.log").read_text()
        assert "plain-tracebacks: rich_tracebacks off (1 skyrl handler(s)" in log
    finally:
        handle.stop()
    assert wait_until(lambda: _group_gone(handle.pid), timeout_s=20.0)


# Runs in the target's Python: the release's own store (complete, mark_retrieved, _sweep) under apply_patches.
_REAL_STORE_PROBE = """
import asyncio, json, sys, typing
from datetime import timedelta
import typing_extensions
typing.TypedDict = typing_extensions.TypedDict  # as skyrl_launch does: pydantic on Python < 3.12
import skyrl_patches
from skyrl.tinker.db_models import RequestStatus
from skyrl.tinker.external_future_store import ExternalFutureStore

skyrl_patches.apply_patches({"ExternalFutureStore": ExternalFutureStore}, [], 1.0, sys.argv[1:])

async def main():
    store = ExternalFutureStore()
    rid = store.create(None, None)
    await store.complete(rid, b"result", RequestStatus.COMPLETED)
    store.mark_retrieved(rid)
    completed = store._entries[rid].completed_at
    kept = []
    for age in (store._RETRIEVED_TTL_SECONDS + 1, store._COMPLETED_TTL_SECONDS - 1, store._COMPLETED_TTL_SECONDS + 1):
        store._sweep(completed + timedelta(seconds=age))
        kept.append(rid in store._entries)
    print(json.dumps(kept))

asyncio.run(main())
"""


@pytest.mark.integration
@pytest.mark.parametrize("fixes, kept", [((), [False, False, False]), (("retain-until-expiry",), [True, True, False])])
def test_retain_until_expiry_on_the_real_store(fixes: tuple[str, ...], kept: list[bool]):
    """0.4.0's own store and sweep: a delivered result is swept after the retrieved TTL; with the fix it is kept
    until the completed TTL, and swept after it."""
    require_target("0.4.0")
    python = install.target_python(TARGETS, parse_target("skyrl==0.4.0"))
    env = {**os.environ, "PYTHONPATH": str(Path(skyrl_patches.__file__).parent)}
    out = subprocess.run(
        [str(python), "-c", _REAL_STORE_PROBE, *fixes], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == kept


FORWARDING_REGRESSIONS = ("httpx-forwarding", "json-decode", "proto-per-poll")


@pytest.mark.integration
@pytest.mark.parametrize("name", FORWARDING_REGRESSIONS)
def test_launch_with_a_forwarding_regression(tmp_path: Path, name: str):
    """0.4.0 takes each forwarding switch (its patch line is logged); 0.3.0, which has none of their patch points, is refused."""
    require_target("0.4.0")
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    handle = _launch(tmp_path / "new", "0.4.0", regress=(name,))
    try:
        assert f'"{name}: ' in (tmp_path / "new" / "server.log").read_text()
    finally:
        handle.stop()
    assert wait_until(lambda: _group_gone(handle.pid), timeout_s=20.0)
    require_target("0.3.0")
    with pytest.raises(ServerStartError, match="exited with code 3(.|\n)*this skyrl version has no"):
        _launch(tmp_path / "old", "0.3.0", regress=(name,))


@pytest.mark.integration
def test_launch_with_unknown_regression_fails_with_log_tail(tmp_path: Path):
    require_target("0.4.0")
    with pytest.raises(ServerStartError) as info:
        _launch(tmp_path, "0.4.0", regress=("nonsense",))
    message = str(info.value)
    assert message.startswith("target skyrl==0.4.0 failed to start (exited with code 3)")
    assert "unknown regression 'nonsense'" in message


@pytest.mark.integration
def test_knob_a_release_lacks_is_refused_by_name(tmp_path: Path):
    """0.3.0 has no in-memory future store, so no retrieved-TTL setting: say so, don't ignore it."""
    require_target("0.3.0")
    with pytest.raises(ServerStartError) as info:
        _launch(tmp_path, "0.3.0", knobs={"retrieved_ttl_s": 30.0})
    assert "no EngineConfig.external_future_retrieved_ttl_sec" in str(info.value)
