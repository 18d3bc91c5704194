"""``faultload setup``'s order: a missing Go said first, then Toxiproxy's build beside the target installs.

Unit tests with test doubles in place of the build and the installs (the
real ones take minutes and the network; ``make setup`` runs them).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import faultload.setup.provision as provision_mod
from faultload.faults.toxiproxy_build import ToxiproxyBuildError
from faultload.host.workspace import Workspace
from faultload.model.target import parse_target
from faultload.targets.install import InstallError

REAL_ENSURE_ROUTER = provision_mod.ensure_router
REAL_ENSURE_CLIENT = provision_mod.ensure_client
SPECS = [parse_target("skyrl==0.4.0"), parse_target("skyrl==0.3.0")]


@pytest.fixture
def steps(monkeypatch):
    """Record each step the setup takes; the doubles below are swapped in for the real build and installs."""
    taken: list[str] = []
    monkeypatch.setattr(provision_mod, "check_release_exists", lambda targets, spec: None)
    monkeypatch.setattr(provision_mod, "ensure_shared_torch", lambda targets, log: taken.append("torch"))
    monkeypatch.setattr(provision_mod, "ensure_router", lambda tools, go, log: None)
    monkeypatch.setattr(provision_mod, "ensure_client", lambda tools, go, log: None)
    return taken


def test_the_compiled_router_and_client_are_built_before_toxiproxy(monkeypatch, steps, tmp_path: Path):
    # make test starts its unit tier once toxiproxy-server is there: the compiled router and client must be there
    built: list[str] = []
    monkeypatch.setattr(provision_mod, "find_go", lambda named: "/usr/bin/go")
    monkeypatch.setattr(provision_mod, "ensure_router", lambda tools, go, log: built.append("router"))
    monkeypatch.setattr(provision_mod, "ensure_client", lambda tools, go, log: built.append("client"))
    monkeypatch.setattr(provision_mod, "ensure_toxiproxy", lambda tools, go, log: built.append("toxiproxy"))
    monkeypatch.setattr(provision_mod, "ensure_target", lambda *a: None)
    assert provision_mod.provision(Workspace(tmp_path), SPECS, None, lambda line: None) is None
    assert built == ["router", "client", "toxiproxy"]


@pytest.mark.parametrize(
    ("step", "real", "named"),
    [
        ("ensure_router", REAL_ENSURE_ROUTER, "compiled router"),
        ("ensure_client", REAL_ENSURE_CLIENT, "compiled client"),
    ],
)
def test_no_go_and_a_compiled_program_missing_is_said_before_any_install(
    monkeypatch, steps, tmp_path: Path, step: str, real, named: str
):
    monkeypatch.setattr(provision_mod, "find_go", lambda named: None)
    monkeypatch.setattr(provision_mod, step, real)  # the real one: nothing built here
    monkeypatch.setattr(provision_mod, "ensure_target", lambda *a: steps.append("target"))
    reason = provision_mod.provision(Workspace(tmp_path), SPECS, None, lambda line: None)
    assert reason is not None and named in reason and "no `go`" in reason and steps == []
    assert not (tmp_path / "tools").exists()


def test_no_go_and_no_toxiproxy_is_said_before_any_install(monkeypatch, steps, tmp_path: Path):
    monkeypatch.setattr(provision_mod, "find_go", lambda named: None)

    def no_toxiproxy(tools, go, log):
        raise ToxiproxyBuildError("no Go toolchain to build toxiproxy-server: install Go")

    monkeypatch.setattr(provision_mod, "ensure_toxiproxy", no_toxiproxy)
    monkeypatch.setattr(provision_mod, "ensure_target", lambda *a: steps.append("target"))
    reason = provision_mod.provision(Workspace(tmp_path), SPECS, None, lambda line: None)
    assert reason == "no Go toolchain to build toxiproxy-server: install Go" and steps == []


def test_the_build_and_the_installs_run_side_by_side(monkeypatch, steps, tmp_path: Path):
    # Every step waits for the other two to have started: run one after another, they would time out.
    started = threading.Barrier(3, timeout=10.0)
    monkeypatch.setattr(provision_mod, "find_go", lambda named: "/usr/bin/go")
    monkeypatch.setattr(provision_mod, "ensure_toxiproxy", lambda tools, go, log: started.wait())

    def install(targets, spec, log):
        started.wait()
        steps.append(spec.text)

    monkeypatch.setattr(provision_mod, "ensure_target", install)
    assert provision_mod.provision(Workspace(tmp_path), SPECS, None, lambda line: None) is None
    assert steps[0] == "torch" and sorted(steps[1:]) == ["skyrl==0.3.0", "skyrl==0.4.0"]


def test_a_failed_install_is_named_and_the_other_still_completes(monkeypatch, steps, tmp_path: Path):
    monkeypatch.setattr(provision_mod, "find_go", lambda named: "/usr/bin/go")
    monkeypatch.setattr(provision_mod, "ensure_toxiproxy", lambda tools, go, log: tmp_path / "toxiproxy-server")

    def install(targets, spec, log):
        if spec.version == "0.4.0":
            raise InstallError("skyrl==0.4.0: pip install failed (exit 1)")
        steps.append(spec.text)

    monkeypatch.setattr(provision_mod, "ensure_target", install)
    reason = provision_mod.provision(Workspace(tmp_path), SPECS, None, lambda line: None)
    assert reason == "skyrl==0.4.0: pip install failed (exit 1)" and steps == ["torch", "skyrl==0.3.0"]


def test_a_failed_build_is_named_after_the_installs_end(monkeypatch, steps, tmp_path: Path):
    monkeypatch.setattr(provision_mod, "find_go", lambda named: "/usr/bin/go")

    def failed_build(tools, go, log):
        raise ToxiproxyBuildError("go install failed: exit 1")

    monkeypatch.setattr(provision_mod, "ensure_toxiproxy", failed_build)
    monkeypatch.setattr(provision_mod, "ensure_target", lambda targets, spec, log: steps.append(spec.text))
    assert provision_mod.provision(Workspace(tmp_path), SPECS, None, lambda line: None) == "go install failed: exit 1"
    assert sorted(steps) == ["skyrl==0.3.0", "skyrl==0.4.0", "torch"]
