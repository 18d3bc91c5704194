"""Targets: install bookkeeping, server handles and the SkyRL patch switches.

The patch tests run ``skyrl_patches.apply_patches`` on a stand-in module
namespace (plain dicts and a fake store class), which is what it receives
inside a launched server. Launching the real installed SkyRL releases is in
``tests/integration/test_targets_integration.py``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import types
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
import pytest
from conftest import wait_until

from faultload.host.network import pick_free_port
from faultload.model.family import SKYRL_CONTRACT
from faultload.model.target import parse_target
from faultload.targets import install, skyrl_patches
from faultload.targets.families.skyrl import launch_skyrl
from faultload.targets.server import ServerHandle, ServerStartError, wait_healthy

# --------------------------------------------------------------------------- install bookkeeping


def test_target_python_and_is_installed(tmp_path: Path):
    spec = parse_target("skyrl==9.9.9")
    python = install.target_python(tmp_path, spec)
    assert python == tmp_path / "skyrl-9.9.9" / "bin" / "python"
    assert not install.is_installed(tmp_path, spec)
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert not install.is_installed(tmp_path, spec)  # no stamp: a half-finished install
    (tmp_path / "skyrl-9.9.9" / install.STAMP).write_text("{}")
    assert install.is_installed(tmp_path, spec)


def test_url_targets_are_not_installed(tmp_path: Path):
    with pytest.raises(install.InstallError):
        install.ensure_target(tmp_path, parse_target("url=http://127.0.0.1:8000"), log=lambda m: None)


def test_a_release_the_index_lacks_is_one_line_before_anything_is_built(tmp_path: Path):
    """``versions`` is a test double of the index (the real one is asked by ``faultload setup``)."""
    index = lambda package: {"skyrl": ["0.4.0", "0.10.0", "0.3.0"]}[package]  # noqa: E731
    with pytest.raises(install.InstallError) as info:
        install.check_release_exists(tmp_path, parse_target("skyrl==9.9.9"), versions=index)
    assert str(info.value) == (
        "skyrl==9.9.9: no such release on the package index (skyrl releases there: 0.3.0, 0.4.0, 0.10.0)"
    )
    install.check_release_exists(tmp_path, parse_target("skyrl==0.4.0"), versions=index)
    install.check_release_exists(tmp_path, parse_target("skyrl==9.9.9"), versions=lambda package: None)  # index silent
    checkout = install.TargetSpec("checkout", f"skyrl@{tmp_path}", path=str(tmp_path))
    install.check_release_exists(tmp_path, checkout, versions=lambda package: [])  # a checkout needs no index
    assert list(tmp_path.iterdir()) == []


def test_an_sdk_release_the_index_lacks_is_one_line_and_leaves_nothing(tmp_path: Path, monkeypatch):
    """``versions`` is a test double of the index; pip must never run for a release it lacks."""
    monkeypatch.setattr(install, "_run", lambda *a, **k: pytest.fail("pip ran for a release the index lacks"))
    index = lambda package: {"tinker": ["0.25.0", "0.38.0"]}[package]  # noqa: E731
    with pytest.raises(install.InstallError) as info:
        install.ensure_sdk(tmp_path / "sdks", "9.9.9", log=lambda m: None, versions=index)
    assert str(info.value) == (
        "tinker==9.9.9: no such release on the package index (tinker releases there: 0.25.0, 0.38.0)"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_failed_sdk_install_removes_its_folder_and_an_installed_one_is_not_asked_again(tmp_path: Path, monkeypatch):
    """pip is replaced by a test double: first failing, then never to be called."""

    def failing_pip(cmd, log, what):
        assert (tmp_path / "tinker-0.38.0").is_dir()  # pip installs into the folder made for it
        raise install.InstallError(f"{what} failed (exit 1)")

    monkeypatch.setattr(install, "_run", failing_pip)
    with pytest.raises(install.InstallError):
        install.ensure_sdk(tmp_path, "0.38.0", log=lambda m: None, versions=lambda package: ["0.38.0"])
    assert not install.sdk_folder(tmp_path, "0.38.0").exists()
    install.sdk_folder(tmp_path, "0.38.0").mkdir()
    (install.sdk_folder(tmp_path, "0.38.0") / install.STAMP).write_text("{}")
    monkeypatch.setattr(install, "_run", lambda *a, **k: pytest.fail("pip ran for an installed release"))
    assert (
        install.ensure_sdk(tmp_path, "0.38.0", log=lambda m: None, versions=lambda package: pytest.fail("index asked"))
        == tmp_path / "tinker-0.38.0"
    )


def test_a_failed_install_removes_the_venv_it_created(tmp_path: Path, monkeypatch):
    """pip is replaced by a test double that fails the way a missing release does."""
    monkeypatch.setattr(install, "ensure_shared_torch", lambda targets, log: targets / "_torch")

    def failing_pip(cmd, log, what):
        if "venv" in cmd:
            (Path(cmd[-1]) / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
            (Path(cmd[-1]) / "bin").mkdir()
            return
        raise install.InstallError(f"{what} failed (exit 1)")

    monkeypatch.setattr(install, "_run", failing_pip)
    monkeypatch.setattr(install, "site_packages", lambda venv: venv / "lib" / "python3.11" / "site-packages")
    with pytest.raises(install.InstallError, match="installing skyrl==9.9.9 failed"):
        install.ensure_target(tmp_path, parse_target("skyrl==9.9.9"), log=lambda m: None)
    assert not (tmp_path / "skyrl-9.9.9").exists()
    kept = tmp_path / "skyrl-9.9.8"  # a venv that was there before the call stays
    kept.mkdir()
    with pytest.raises(install.InstallError):
        install.ensure_target(tmp_path, parse_target("skyrl==9.9.8"), log=lambda m: None)
    assert kept.is_dir()


# --------------------------------------------------------------------------- server handles


def test_log_tail(tmp_path: Path):
    log = tmp_path / "server.log"
    log.write_text("\n".join(f"line {i}" for i in range(100)) + "\n")
    handle = ServerHandle(parse_target("skyrl==0.4.0"), "http://127.0.0.1:1", None, None, log)
    assert handle.log_tail(3) == "line 97\nline 98\nline 99"
    assert ServerHandle(parse_target("skyrl==0.4.0"), "http://127.0.0.1:1", None, None).log_tail() == ""


def test_stop_kills_the_whole_process_group():
    """stop() must reach the server's children too (the engine sleeper lives in its group)."""
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"], start_new_session=True)
    try:
        assert wait_until(lambda: len(psutil.Process(proc.pid).children()) == 2, timeout_s=10.0)
        children = [c.pid for c in psutil.Process(proc.pid).children()]
        handle = ServerHandle(parse_target("skyrl==0.4.0"), "http://127.0.0.1:1", proc.pid, None, process=proc)
        assert handle.alive()
        handle.stop(grace_s=5)
        assert not handle.alive()
        assert wait_until(
            lambda: (
                not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in children)
            ),
            10.0,
        )
        handle.stop()  # idempotent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_stop_escalates_to_sigkill():
    proc = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60 & wait; sleep 60"], start_new_session=True)
    try:
        # Once the shell's first child runs, its trap (set before it) is in place.
        assert wait_until(lambda: len(psutil.Process(proc.pid).children()) >= 1, timeout_s=10.0)
        handle = ServerHandle(parse_target("skyrl==0.4.0"), "http://127.0.0.1:1", proc.pid, None, process=proc)
        handle.stop(grace_s=0.5)
        assert proc.poll() is not None
        assert "killed" in handle.details.get("stop", "")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_wait_healthy_gives_up_when_the_process_exits():
    proc = subprocess.Popen(["true"])
    proc.wait(timeout=10)
    assert wait_healthy(f"http://127.0.0.1:{pick_free_port()}", timeout_s=30.0, process=proc) is False


def test_launch_refuses_a_port_in_use_before_starting_anything(tmp_path: Path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(ServerStartError, match=f"port {port}.*in use"):
            launch_skyrl(
                parse_target("skyrl==0.4.0"), Path("/nonexistent/python"), tmp_path, port, "http://127.0.0.1:1"
            )
    assert not (tmp_path / "launch.json").exists()


# --------------------------------------------------------------------------- patches (on a stand-in namespace)


class _FakeStore:
    _SWEEP_INTERVAL_SECONDS = 30.0
    _RETRIEVED_TTL_SECONDS = 300.0
    _COMPLETED_TTL_SECONDS = 600.0
    _PENDING_TTL_SECONDS = 3600.0

    def __init__(self, *, retrieved_ttl_sec=None, completed_ttl_sec=None):
        self.retrieved = retrieved_ttl_sec
        self.completed = completed_ttl_sec


def _namespace() -> dict:
    store = type("ExternalFutureStore", (_FakeStore,), {})
    return {
        "ExternalFutureStore": store,
        "RETRIEVE_FUTURE_TIMEOUT_SECONDS": 300.0,
        "HTTP_KEEP_ALIVE_TIMEOUT_SECONDS": 75,
        "SKYRL_HTTP_CONNECTION_LIMIT": 8192,
        "get_uvicorn_log_config": lambda: {
            "handlers": {"default": {"class": "rich.logging.RichHandler"}, "access": {"class": "logging.StreamHandler"}}
        },
    }


def test_time_scale_scales_every_server_timer():
    ns = _namespace()
    applied = skyrl_patches.apply_patches(ns, [], 0.1)
    store = ns["ExternalFutureStore"]
    assert store._SWEEP_INTERVAL_SECONDS == pytest.approx(3.0)
    assert store._PENDING_TTL_SECONDS == pytest.approx(360.0)
    assert ns["RETRIEVE_FUTURE_TIMEOUT_SECONDS"] == pytest.approx(30.0)
    default = store()
    assert (default.retrieved, default.completed) == (pytest.approx(30.0), pytest.approx(60.0))
    configured = store(retrieved_ttl_sec=50.0, completed_ttl_sec=70.0)
    assert (configured.retrieved, configured.completed) == (pytest.approx(5.0), pytest.approx(7.0))
    assert any("x0.1" in line for line in applied)


def test_regressions_apply_and_report(monkeypatch):
    from starlette.requests import Request

    monkeypatch.setattr(Request, "is_disconnected", Request.is_disconnected)  # restored after the test
    ns = _namespace()
    applied = skyrl_patches.apply_patches(ns, ["keepalive", "rich-access-log", "retention"], 1.0)
    assert ns["HTTP_KEEP_ALIVE_TIMEOUT_SECONDS"] == 5
    assert ns["SKYRL_HTTP_CONNECTION_LIMIT"] == 2048
    config = ns["get_uvicorn_log_config"]()
    assert config["handlers"]["access"] == config["handlers"]["default"]
    store = ns["ExternalFutureStore"](retrieved_ttl_sec=300.0)
    assert store.retrieved == pytest.approx(skyrl_patches.PRE_FIX_RETRIEVED_TTL_S)
    assert len(applied) == 4 and applied[0].startswith("keepalive")


def test_the_keepalive_fix_outlasts_the_sdks_idle_connections_and_is_scaled():
    from faultload.client.sdk_timers import PYQWEST_IDLE_TIMEOUT_S

    ns = _namespace()
    applied = skyrl_patches.apply_patches(ns, [], 0.05, ["keepalive-past-sdk"])
    assert ns["HTTP_KEEP_ALIVE_TIMEOUT_SECONDS"] == pytest.approx(skyrl_patches.KEEPALIVE_PAST_SDK_S * 0.05)
    assert skyrl_patches.KEEPALIVE_PAST_SDK_S > PYQWEST_IDLE_TIMEOUT_S  # past what the SDK's pool keeps idle
    assert applied[0] == "keepalive-past-sdk: keep-alive 120 s"
    with pytest.raises(skyrl_patches.PatchError, match="HTTP_KEEP_ALIVE_TIMEOUT_SECONDS"):
        skyrl_patches.apply_patches({}, [], 1.0, ["keepalive-past-sdk"])


class _DeliveryStore(_FakeStore):
    """A stand-in for 0.4.0's ExternalFutureStore delivery clock (the harness's venv has no skyrl; the real one
    is exercised by ``test_retain_until_expiry_on_the_real_store``, tests/integration/test_targets_integration.py):
    TTLs on the instance, entries, and ``mark_retrieved`` and the sweep's rule as the release has them."""

    def __init__(self, *, retrieved_ttl_sec=None, completed_ttl_sec=None):
        self._RETRIEVED_TTL_SECONDS = retrieved_ttl_sec or self._RETRIEVED_TTL_SECONDS
        self._COMPLETED_TTL_SECONDS = completed_ttl_sec or self._COMPLETED_TTL_SECONDS
        self._entries: dict[int, types.SimpleNamespace] = {}

    def completed(self, request_id: int, at: datetime) -> None:
        self._entries[request_id] = types.SimpleNamespace(completed_at=at, retrieved_at=None)

    def mark_retrieved(self, request_id: int) -> None:
        entry = self._entries.get(request_id)
        if entry is not None:
            entry.retrieved_at = datetime.now(timezone.utc)

    def kept_until(self, request_id: int) -> datetime:
        """When the release's sweep would first drop the entry (a retrieved one: its retrieved TTL on)."""
        entry = self._entries[request_id]
        if entry.retrieved_at is not None:
            return entry.retrieved_at + timedelta(seconds=self._RETRIEVED_TTL_SECONDS)
        return entry.completed_at + timedelta(seconds=self._COMPLETED_TTL_SECONDS)


def _delivery_namespace() -> dict:
    return {**_namespace(), "ExternalFutureStore": type("ExternalFutureStore", (_DeliveryStore,), {})}


@pytest.mark.parametrize("scale, regress", [(1.0, ()), (0.05, ()), (1.0, ("retention",))])
def test_retain_until_expiry_keeps_a_delivered_result_its_completed_ttl(monkeypatch, scale: float, regress: tuple):
    """A result delivered soon after completion is kept until completion + the completed TTL (the release: delivery
    + the retrieved TTL), with the store's scaled or regressed TTLs; a late delivery still gets its retrieved TTL."""
    from starlette.requests import Request

    monkeypatch.setattr(Request, "is_disconnected", Request.is_disconnected)  # the retention regression patches it
    ns = _delivery_namespace()
    applied = skyrl_patches.apply_patches(ns, list(regress), scale, ["retain-until-expiry"])
    assert applied[len(regress)].startswith("retain-until-expiry: ")
    store = ns["ExternalFutureStore"]()
    now = datetime.now(timezone.utc)
    completed_ttl = timedelta(seconds=SKYRL_CONTRACT.completed_ttl_s * scale)
    assert store._RETRIEVED_TTL_SECONDS < completed_ttl.total_seconds()  # else the fix has nothing to keep
    store.completed(1, now)
    store.mark_retrieved(1)
    assert store.kept_until(1) == now + completed_ttl
    late = now - completed_ttl  # completed a whole completed TTL ago: delivered now, kept the retrieved TTL
    store.completed(2, late)
    store.mark_retrieved(2)
    retrieved_ttl = timedelta(seconds=store._RETRIEVED_TTL_SECONDS)
    assert store._entries[2].retrieved_at >= now and store.kept_until(2) >= now + retrieved_ttl
    store.mark_retrieved(3)  # no such entry (swept, or another process's id): nothing to keep, no error
    assert 3 not in store._entries


def test_without_the_fix_a_delivered_result_is_kept_its_retrieved_ttl_only():
    """The stand-in's release behaviour the fix changes: the retrieved TTL from delivery, shorter than expiry."""
    ns = _delivery_namespace()
    skyrl_patches.apply_patches(ns, [], 1.0)
    store = ns["ExternalFutureStore"]()
    now = datetime.now(timezone.utc)
    store.completed(1, now)
    store.mark_retrieved(1)
    assert store.kept_until(1) < now + timedelta(seconds=SKYRL_CONTRACT.completed_ttl_s)


def test_retain_until_expiry_refuses_a_version_without_its_patch_points():
    ns = _namespace()  # a store class with no mark_retrieved
    with pytest.raises(skyrl_patches.PatchError, match="ExternalFutureStore.mark_retrieved"):
        skyrl_patches.apply_patches(ns, [], 1.0, ["retain-until-expiry"])
    del ns["ExternalFutureStore"]  # 0.3.0: futures in SQLite
    with pytest.raises(skyrl_patches.PatchError, match="no 'ExternalFutureStore'"):
        skyrl_patches.apply_patches(ns, [], 1.0, ["retain-until-expiry"])


def test_unknown_regression_is_refused_by_name():
    from faultload.model.switches import REGRESSIONS

    with pytest.raises(skyrl_patches.PatchError) as info:
        skyrl_patches.apply_patches(_namespace(), ["nonsense"], 1.0)
    assert str(info.value) == f"unknown regression 'nonsense'; known: {', '.join(sorted(REGRESSIONS))}"


def test_plain_tracebacks_fix_turns_rich_tracebacks_off(monkeypatch):
    """On a stand-in ``skyrl.utils.log`` (the harness's venv has no skyrl): the settings and the live handler."""
    import logging
    import sys
    import types

    from rich.logging import RichHandler

    handler = RichHandler(rich_tracebacks=True)
    logger = logging.getLogger("skyrl")
    monkeypatch.setattr(logger, "handlers", [handler, logging.NullHandler()])
    log_module = types.ModuleType("skyrl.utils.log")
    log_module.RICH_HANDLER_KWARGS = {"show_time": False, "rich_tracebacks": True}
    utils = types.ModuleType("skyrl.utils")
    utils.log = log_module
    monkeypatch.setitem(sys.modules, "skyrl", types.ModuleType("skyrl"))
    monkeypatch.setitem(sys.modules, "skyrl.utils", utils)
    monkeypatch.setitem(sys.modules, "skyrl.utils.log", log_module)
    applied = skyrl_patches.apply_patches(_namespace(), [], 1.0, ["plain-tracebacks"])
    assert handler.rich_tracebacks is False and log_module.RICH_HANDLER_KWARGS["rich_tracebacks"] is False
    assert applied[0] == "plain-tracebacks: rich_tracebacks off (1 skyrl handler(s) and uvicorn's)"
    del log_module.RICH_HANDLER_KWARGS["rich_tracebacks"]
    with pytest.raises(skyrl_patches.PatchError, match="no RICH_HANDLER_KWARGS"):
        skyrl_patches.apply_patches(_namespace(), [], 1.0, ["plain-tracebacks"])


def test_unknown_fix_is_refused_by_name():
    with pytest.raises(skyrl_patches.PatchError) as info:
        skyrl_patches.apply_patches(_namespace(), [], 1.0, ["nope"])
    assert str(info.value) == f"unknown fix 'nope'; known: {', '.join(sorted(skyrl_patches.FIXES))}"


def test_missing_patch_point_is_refused_by_name():
    ns = _namespace()
    del ns["HTTP_KEEP_ALIVE_TIMEOUT_SECONDS"]
    with pytest.raises(skyrl_patches.PatchError, match="HTTP_KEEP_ALIVE_TIMEOUT_SECONDS"):
        skyrl_patches.apply_patches(ns, ["keepalive"], 1.0)


def test_version_without_store_says_nothing_to_scale():
    ns = _namespace()
    del ns["ExternalFutureStore"]
    applied = skyrl_patches.apply_patches(ns, [], 0.5)
    assert ns["RETRIEVE_FUTURE_TIMEOUT_SECONDS"] == 300.0
    assert any("nothing to scale" in line for line in applied)


# --------------------------------------------------------------------------- the switch lists, the shared torch


def test_the_harness_names_the_switches_the_target_side_carries() -> None:
    """faultload.model.switches (harness side) and skyrl_patches / tuft_fixes (inside the target) list the same
    switches."""
    from faultload.model import switches
    from faultload.targets import hatchery_fixes, tuft_fixes, twinkle_fixes

    assert set(switches.HATCHERY_FIXES) == set(hatchery_fixes.FIXES)
    assert set(switches.TWINKLE_FIXES) == set(twinkle_fixes.FIXES)
    assert set(switches.REGRESSIONS) == set(skyrl_patches.REGRESSIONS)
    assert set(switches.SKYRL_FIXES) == set(skyrl_patches.FIXES)
    assert set(switches.TUFT_FIXES) == set(tuft_fixes.FIXES) >= set(tuft_fixes.BEFORE_IMPORT)
    assert (
        switches.unknown_switch(["retention"], ["nope"])
        == f"unknown fix 'nope'; known: {', '.join(sorted(switches.FIXES))}"
    )
    assert skyrl_patches.unknown_switch(["nope"], []) is not None and skyrl_patches.unknown_switch([], []) is None


def test_the_plugins_help_names_every_switch():
    """The plugin imports nothing of faultload (it is loaded by every pytest run), so its --faultload-regress and
    --faultload-fix help lines spell the switch names out; this keeps them equal to model/switches.py's."""

    from faultload.model.switches import FIXES, REGRESSIONS
    from faultload.suite import plugin

    seen: dict[str, str] = {}

    class Group:
        def addoption(self, *names, **kwargs):
            seen[names[0]] = kwargs.get("help", "")

    class Parser:
        def getgroup(self, *args):
            return Group()

        def addini(self, *args, **kwargs):
            pass

    plugin.pytest_addoption(Parser())
    assert all(name in seen["--faultload-regress"] for name in REGRESSIONS)
    assert all(name in seen["--faultload-fix"] for name in FIXES)


def test_the_shared_torch_path_is_the_real_one_through_a_symlinked_workspace(tmp_path) -> None:
    """A scratch workspace whose targets link to the installed ones wrote the link's path into a target's .pth
    and stamp once: the venv broke when the scratch folder went. An installed torch venv (its stamp and python,
    no torch in it: nothing is installed here) is reached through a link and named by its real path."""
    real = tmp_path / "real"
    torch_venv = real / "_torch"
    (torch_venv / "bin").mkdir(parents=True)
    (torch_venv / "bin" / "python").write_text("")
    (torch_venv / install.STAMP).write_text(json.dumps({"torch": install.TORCH_REQUIREMENT}))
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    site = install.ensure_shared_torch(tmp_path / "link", log=lambda message: pytest.fail(message))
    assert site == install.site_packages(torch_venv.resolve())
