"""``faultload run --fault ...`` end to end through a subprocess: bad specs.

Bad specs must exit 2 with ONE stderr line that names what is wrong, before
anything starts: no toxiproxy-server, router or SkyRL launcher process (every
process a run starts inherits a unique tag in its environment, so other
people's runs on this machine are never mistaken for ours) and no new folder
under ``.faultload/runs``. The runs use the default workspace (``.faultload``
in the working directory), with the working directory a private folder whose
``.faultload/targets`` and ``tools`` are the real installed ones.

A router fault without proxies, a run killed mid-fault and both streams' toxics
on the real server and Toxiproxy: ``tests/integration/test_fault_cli_integration.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_faultload_run, tagged_named, tagged_processes, wait_until

# --------------------------------------------------------------------------- bad specs


@pytest.mark.parametrize(
    "spec, needles",
    [
        ("foo:latency:latency=5", ("fault.link", "'foo'", "edge, backend, router")),
        ("edge:explode", ("fault.kind", "'explode'", "latency")),
        ("router:latency:latency=5", ("fault.kind", "'latency'", "stall")),
        ("edge:latency:latenc=5", ("fault.attributes", "'latenc'", "allowed: latency, jitter")),
        ("edge:latency", ("fault.attributes", "requires latency")),
        ("edge:latency:latency=abc", ("fault.attributes.latency", "'abc'", "not a number")),
        ("edge:latency:latency=1.5", ("fault.attributes.latency", "whole number")),
        ("edge:down@-1+2", ("fault.start_s", "negative")),
        ("edge:down@x+2", ("fault.start_s/duration_s", "'x+2'")),
        ("edge:down@1+0", ("fault.duration_s", "must be > 0")),
        ("edge:down@1+-2", ("fault.duration_s", "negative")),
        ("edge:down@1+nan", ("fault.duration_s", "not a finite number")),
        ("edge:latency:latency=5,toxicity=2", ("fault.toxicity", "2", "outside [0, 1]")),
        ("edge:latency:latency=5,stream=sideways", ("fault.stream", "'sideways'", "downstream, upstream, both")),
        ("edge:latency:latency=5,stream=both,stream=upstream", ("fault.stream", "given twice")),
        ("edge:down:toxicity=0.5", ("fault.stream/toxicity", "'down'")),
        ("backend:down:stream=both@0+36", ("fault.stream/toxicity", "'down'")),
        ("router:stall:stream=upstream", ("fault.stream/toxicity", "'stall'")),
        ("backend:limit_data:stream=both", ("fault.attributes", "requires bytes")),
        ("router:errors:status=200", ("fault.attributes.status", "200", "5xx")),
        ("server:pause@3", ("fault.duration_s", "server:pause needs a window")),
        ("router:pause", ("fault.duration_s", "router:pause needs a window")),
        ("server:restart@5+3", ("fault.duration_s", "takes no duration")),
        ("server:crash@1", ("fault.kind", "'crash'", "server kinds: pause, restart")),
    ],
)
def test_bad_fault_spec_exits_2_with_one_line_and_starts_nothing(fault_home: Path, spec: str, needles: tuple[str, ...]):
    proc, tag = run_faultload_run(fault_home, ["--fault", spec, "--requests", "10", "--quiet"])
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr[-2000:]
    line = lines[0]
    assert line.startswith("faultload: error: "), line
    for needle in needles:
        assert needle in line, (needle, line)
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    # Nothing was started: no process of ours (any, and by name), no run folder.
    assert wait_until(lambda: not tagged_processes(tag), timeout_s=5.0), [p.cmdline() for p in tagged_processes(tag)]
    assert tagged_named(tag) == []
    runs = fault_home / ".faultload" / "runs"
    assert not runs.exists() or list(runs.iterdir()) == [], list(runs.iterdir())
    assert not [p for p in fault_home.iterdir() if p.name.startswith("faultload-router-")]  # TMPDIR is fault_home here


def test_edge_fault_with_proxies_off_is_refused(fault_home: Path):
    proc, tag = run_faultload_run(
        fault_home, ["--fault", "edge:down@1+1", "--proxies", "off", "--requests", "10", "--quiet"]
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "proxies" in lines[0], proc.stderr
    assert wait_until(lambda: not tagged_processes(tag), timeout_s=5.0)
    assert not (fault_home / ".faultload" / "runs").exists() or not list((fault_home / ".faultload" / "runs").iterdir())
