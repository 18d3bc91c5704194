"""``faultload doctor``: what this machine allows, and what is installed, each with what to do."""

from __future__ import annotations

from dataclasses import dataclass

from faultload.client.compiled import CLIENT
from faultload.faults.toxiproxy import check_toxiproxy, find_go
from faultload.host.limits import machine_limits
from faultload.host.workspace import Workspace
from faultload.model.target import TargetSpec
from faultload.router.compiled import ROUTER
from faultload.targets import install

SETUP_BUILDS = "faultload setup (builds it with Go)"
# Below these a full-size run has to shrink (see the 131k design notes in the README).
WANT_NOFILE = 20_000
WANT_SOMAXCONN = 4096


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    value: str
    advice: str = ""
    # A short check that is not required is a warning: shown, but doctor still exits 0.
    required: bool = True


def run_checks(workspace: Workspace, targets: list[TargetSpec], go_named: str | None = None) -> list[Check]:
    """``go_named``: the ``GO`` environment variable as the CLI read it (a Go binary to use), if set."""
    return [*_machine_checks(), *_tool_checks(workspace, go_named), *_target_checks(workspace, targets)]


def _machine_checks() -> list[Check]:
    limits = machine_limits()
    return [
        Check(
            "open files (per process)",
            limits["nofile_hard"] >= WANT_NOFILE,
            f"soft {limits['nofile_soft']}, hard {limits['nofile_hard']}",
            f"raise the hard limit to >= {WANT_NOFILE} (ulimit -Hn / limits.conf); faultload raises soft to hard itself",
        ),
        Check(
            "net.core.somaxconn",
            limits["somaxconn"] >= WANT_SOMAXCONN,
            str(limits["somaxconn"]),
            f"sysctl -w net.core.somaxconn={WANT_SOMAXCONN} (accept queues are capped by it)",
        ),
        Check(
            "ephemeral ports per source IP",
            limits["ephemeral_ports"] >= 16_384,
            str(limits["ephemeral_ports"]),
            "widen net.ipv4.ip_local_port_range, or use more --workers (each binds its own 127.0.1.x)",
        ),
    ]


def _tool_checks(workspace: Workspace, go_named: str | None) -> list[Check]:
    """Toxiproxy and faultload's compiled programs (the router is needed; without the client the raw client
    runs in Python), then Go, needed only while one of them is not built."""
    go = find_go(go_named)
    toxiproxy_ok, message = check_toxiproxy(workspace.tools, go=go or "")
    checks = [Check("toxiproxy", toxiproxy_ok, message)]
    for program, required, without in ((ROUTER, True, ""), (CLIENT, False, ": the raw client runs in Python")):
        found = program.find(workspace.tools)
        value = str(found) if found else f"{program.binary_name()} not built{without}"
        checks.append(Check(program.what.removeprefix("the "), found is not None, value, SETUP_BUILDS, required))
    built = all(check.ok for check in checks)
    # Go only builds Toxiproxy and the compiled router and client: a machine with all three built lacks nothing.
    advice = (
        "needed only to build toxiproxy and the compiled router and client, which are built: nothing to do"
        if built
        else "needed to build toxiproxy and the compiled router and client; see their lines"
    )
    named = f" (GO={go_named})" if go_named else ""
    checks.append(Check("go toolchain", go is not None, go or f"not found{named}", advice, required=not built))
    return checks


def _target_checks(workspace: Workspace, targets: list[TargetSpec]) -> list[Check]:
    checks = []
    for spec in targets:
        if spec.kind == "url":
            checks.append(Check(f"target {spec.text}", True, "started by you; checked at run time"))
            continue
        ready = install.is_installed(workspace.targets, spec)
        checks.append(
            Check(
                f"target {spec.text}",
                ready,
                "installed" if ready else "not installed",
                f"faultload setup --target {spec.text}",
            )
        )
    return checks


def failed(checks: list[Check]) -> list[Check]:
    """The short checks that make doctor exit 2 (warnings do not)."""
    return [c for c in checks if not c.ok and c.required]


def render(checks: list[Check]) -> str:
    lines = []
    for check in checks:
        mark = "ok  " if check.ok else "SHORT" if check.required else "warn "
        line = f"[{mark}] {check.name}: {check.value}"
        if not check.ok and check.advice:
            line += f"  -> {check.advice}"
        lines.append(line)
    return "\n".join(lines)
