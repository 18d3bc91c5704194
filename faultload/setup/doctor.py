"""``faultload doctor``: what this machine allows, and what is installed, each with what to do."""

from __future__ import annotations

from dataclasses import dataclass

from faultload.faults.toxiproxy import check_toxiproxy, find_go
from faultload.host.limits import machine_limits
from faultload.host.workspace import Workspace
from faultload.model.target import TargetSpec
from faultload.router.compiled import binary_name, find_router
from faultload.targets import install

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
    limits = machine_limits()
    checks = [
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
    go = find_go(go_named)
    toxiproxy_ok, message = check_toxiproxy(workspace.tools, go=go or "")
    checks.append(Check("toxiproxy", toxiproxy_ok, message))
    router = find_router(workspace.tools)
    checks.append(
        Check(
            "compiled router",
            router is not None,
            str(router) if router else f"{binary_name()} not built",
            "faultload setup (builds it with Go)",
        )
    )
    built = toxiproxy_ok and router is not None
    # Go only builds Toxiproxy and the compiled router: without it, a machine with both built lacks nothing.
    advice = (
        "needed only to build toxiproxy and the compiled router, which are built: nothing to do"
        if built
        else "needed to build toxiproxy and the compiled router; see their lines"
    )
    named = f" (GO={go_named})" if go_named else ""
    checks.append(Check("go toolchain", go is not None, go or f"not found{named}", advice, required=not built))
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
