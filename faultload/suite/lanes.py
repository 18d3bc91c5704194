"""The suite's properties side by side: each on a lane of its own, a trial that needs the machine alone.

A session of ``pytest faultload`` runs its properties on lanes — pytest-xdist workers, each with its own
shared stack (server, router, Toxiproxy, ports) — as many as :mod:`faultload.host.lanes` finds this machine
holds. A property's examples still run one after another on its lane (Hypothesis draws each from the last), and
every trial of every lane, and of every other session in the same workspace (a matrix's rows), takes its turn
through :mod:`faultload.host.admission`: beside the others, or alone when it :func:`needs_machine`.

The controller (the pytest process the user started) runs no trial: it merges its lanes' summaries
(:func:`merge_summaries`) into the one the session writes and prints, and records the lanes' measured needs
for the next session's count.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from faultload.host.admission import Admission
from faultload.host.lanes import LaneNeeds, Lanes
from faultload.host.lanes import admission_for as host_admission_for
from faultload.host.lanes import machine_lanes as host_lanes
from faultload.host.signals import INTERRUPT_SIGNALS
from faultload.host.workspace import Workspace
from faultload.model.target import parse_target

# A trial of at least this many requests needs the machine: its load alone keeps a core busy for seconds (the
# size trials hold 2,048 and 16,384 at once; bounded_cpu's sample is 1,200; completion_burst 6,000), and its
# budgets (the /healthz p99, the submit percentiles, held polls, the watchdog's no-progress window) read wall
# time while it does. The ci profile draws at most 256.
ALONE_FROM_REQUESTS = 1024
# A burst this size or larger (owed at once to an immediate router) takes half the slots (burst_share): on a
# ci matrix row, a 253-request burst beside eight lanes' trials read a /healthz p99 of 3.1 s (budget 2.5 s)
# with the rich-access-log regression's costlier access log, and its server logged a forward reset with no fault.
BURST_REQUESTS = 100
# The suite's properties (faultload.suite.properties.PROPERTIES): more lanes than these would only wait.
MOST_LANES = 9


def needs_machine(requests: int, comparative: bool, shrinking: bool, starting: bool = False) -> str | None:
    """Why a trial runs with nothing beside it, or None when it may run beside others."""
    if starting:
        return "its lane's stack starts first: a server's start-up keeps a core busy for seconds"
    if comparative:
        return "a comparison: both builds' timings, each trial on a machine as quiet as the other's"
    if shrinking:
        return "shrinking a failure: its repro is what it would be alone"
    if requests >= ALONE_FROM_REQUESTS:
        return f"{requests:,} requests: past {ALONE_FROM_REQUESTS:,}, its own load keeps the machine busy"
    return None


def burst_share(config: Any, slots: int) -> int:
    """The slots a trial takes: half of them for a burst (:data:`BURST_REQUESTS` or more owed at once to an
    immediate router, all arriving at the start: the server's event loop busy for the whole trial, a core), so two
    bursts never run at once and a burst has half the machine's trials beside it at most; one for any other."""
    shape = config.shape
    at_once = min(shape.max_outstanding or shape.requests, shape.requests)
    if config.router.mode == "immediate" and shape.arrival == "burst" and at_once >= BURST_REQUESTS:
        return max(1, math.ceil(slots / 2))
    return 1


@contextmanager
def turn(
    admission: Admission | None,
    label: str,
    alone: str | None,
    log: Callable[[str], None],
    waited: Callable[[float], None] = lambda seconds: None,
    share: int = 1,
) -> Iterator[None]:
    """A trial's turn of the machine: every slot when ``alone`` says why, else ``share`` slots beside the others;
    ``log`` says which, and beside what (the session's record of what ran beside what); ``waited`` is told how
    long the turn took to come."""
    if admission is None:
        yield
        return
    asked = time.monotonic()
    if alone:
        with admission.alone(label):
            waited(time.monotonic() - asked)
            log(f"runs alone: {alone}")
            yield
        return
    if share > 1:
        with admission.share(label, share) as others:
            waited(time.monotonic() - asked)
            log(f"a burst, {share} of {admission.slots} slots, beside {'; '.join(others) or 'nothing'}")
            yield
        return
    with admission.beside(label) as others:
        waited(time.monotonic() - asked)
        if others:
            log(f"beside {'; '.join(others)}")
        yield


@contextmanager
def trial_turn(
    admission: Admission | None, lane: str, state: Any, config: Any, executor: Any, log: Callable[[str], None]
) -> Iterator[None]:
    """One trial's turns of the machine: its lane's stack started alone first when it must start (a start keeps a
    core busy for seconds; alone for the start only, not for the trial after it), then the trial itself, alone when
    it needs the machine (:func:`needs_machine`), else beside the others. While the property shrinks, the time its
    turns took to come is added to ``state.shrink_waited_s``: the shrink's budget is spent on its own trials, not
    on the other lanes' (each candidate alone, the others' trials between them)."""
    name = state.nodeid.split("::")[-1]
    label = f"{lane + ' ' if lane else ''}{name} trial {state.trials + 1} ({config.shape.requests} req)"
    shrinking = state.shrinking

    def waited(seconds: float) -> None:
        if shrinking:
            state.shrink_waited_s += seconds

    if admission is not None and getattr(executor, "needs_start", lambda config: False)(config):
        start_label = f"{label}: its stack's start"
        with turn(admission, start_label, needs_machine(0, False, False, starting=True), log, waited):
            executor.prepare(config)
    comparative = bool(state.prop and state.prop.comparative)
    alone = needs_machine(config.shape.requests, comparative, shrinking)
    share = burst_share(config, admission.slots) if admission is not None else 1
    with turn(admission, label, alone, log, waited, share):
        yield


def names_suite(paths: list[str], pyargs: bool, package_dir: Path) -> bool:
    """Whether a pytest command line's paths name the suite's properties (``pytest faultload``,
    ``pytest path/to/faultload/suite``, ``pytest --pyargs faultload.suite``)."""
    suite_dir = (package_dir / "suite").resolve()
    for arg in paths:
        name = arg.split("::")[0]
        if pyargs and (name == "faultload" or name.startswith("faultload.suite")):
            return True
        path = Path(name).resolve()
        if path == package_dir.resolve() or path == suite_dir or suite_dir in path.parents:
            return True
    return False


def workspace_of(config: pytest.Config, environ: Mapping[str, str]) -> Workspace:
    """The session's workspace, as its options and the plugin's environment name it."""
    return Workspace.default(config.getoption("faultload_workdir", None) or environ.get("FAULTLOAD_HOME"))


def machine_lanes(workspace: Workspace, stacks: int = 1) -> Lanes:
    """How many lanes this machine holds now for the suite's properties (``stacks`` a lane: 2 with a base)."""
    return host_lanes(workspace.root, MOST_LANES, stacks)


def admission_for(workspace: Workspace, session_s: float, workercount: int | None) -> Admission:
    """A session's turns of the machine: as many slots as the controller gave lanes (``workercount``, on a lane),
    else as this machine holds (a session of one lane, which a matrix's other rows may join)."""
    slots = workercount if workercount is not None else machine_lanes(workspace).count
    return host_admission_for(workspace.root, session_s, slots)


# A lane's collection imports the suite's machinery (Hypothesis, numpy, the runner): 2.6 s of CPU measured
# (`pytest --collect-only faultload`), nine lanes at once ~23 s over two cores. It waits this long at most for a
# turn beside the others (a trial alone elsewhere in the workspace would read that CPU as its server's latency).
COLLECT_WAIT_S = 1800.0


@contextmanager
def collection_turn(config: pytest.Config, environ: Mapping[str, str]) -> Iterator[None]:
    """A lane's collection of the properties at a turn beside the others (never beside a trial that runs alone)."""
    workercount = int(config.workerinput.get("workercount", 1))
    admission = admission_for(workspace_of(config, environ), COLLECT_WAIT_S, workercount)
    with admission.beside(f"{lane_of(config)} collecting the properties"):
        yield


def lane_log(lane: str, capture: Any) -> Callable[[str], None]:
    """A lane's progress lines: to its stderr, which pytest-xdist passes to the controller's terminal, each named
    by its lane (``capture``: pytest's capture manager, set aside while a line is written)."""

    def log(message: str) -> None:
        if capture is None:
            print(f"faultload [{lane}]: {message}", file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            print(f"faultload [{lane}]: {message}", file=sys.stderr, flush=True)

    return log


def choose_lanes(config: pytest.Config, environ: Mapping[str, str], package_dir: Path) -> Lanes | None:
    """The lanes of a session of the suite's properties, set as pytest-xdist's worker count; None when the
    session runs one lane (``--faultload-lanes 1``, an explicit ``-n``, ``--collect-only``, or a run that is not
    the suite's)."""
    given = str(config.getoption("faultload_lanes", "auto"))
    if given != "auto" and (not given.isdigit() or int(given) < 1):
        raise pytest.UsageError(f"--faultload-lanes: {given!r} is neither a count of lanes (1, 2, ...) nor auto")
    if getattr(config.option, "numprocesses", None) is not None or config.getoption("collectonly", False):
        return None
    if config.getoption("faultload_ray", None):  # its load runs on the cluster, which one driver joins
        return None
    target = config.getoption("faultload_target", None)
    if target and _is_url(target):  # one server someone else started: lanes would load each other's trials
        return None
    if not names_suite([str(a) for a in config.args], bool(config.getoption("pyargs", False)), package_dir):
        return None
    lanes = machine_lanes(workspace_of(config, environ), 2 if config.getoption("faultload_base", None) else 1)
    if given != "auto":
        lanes = dataclasses.replace(lanes, count=int(given))
    if lanes.count <= 1:
        return None
    config.option.numprocesses = lanes.count
    if config.option.dist == "no":
        config.option.dist = "worksteal"  # a lane that ends early takes a property another lane has not begun
    return lanes


def stop_mark(workspace: Workspace) -> Path:
    """Where a controller marks that its lanes should stop (``-x``): under the workspace's turns, named by the
    controller's process, removed when its session ends."""
    mark = workspace.root / "admission" / f"stop-{os.getpid()}"
    mark.unlink(missing_ok=True)  # a crashed controller's, of the same process id
    return mark


def mark_stop(mark: Path) -> None:
    """Tell a controller's lanes to stop (made here, not before: a bad command line leaves nothing behind)."""
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.touch()


def forward_interrupts(mark: Path, interrupted: Callable[[], None]) -> dict[int, Any]:
    """A controller's handlers for the interrupt signals: ``interrupted()``, then its lanes interrupted
    (:func:`interrupt_lanes`), then pytest's Ctrl-C path; the handlers they replace, returned."""
    previous = {sig: signal.getsignal(sig) for sig in INTERRUPT_SIGNALS}

    def on_interrupt(signum: int, frame: Any) -> None:
        interrupted()
        interrupt_lanes(mark, signum)
        raise KeyboardInterrupt

    for sig in INTERRUPT_SIGNALS:
        signal.signal(sig, on_interrupt)
    return previous


def interrupt_lanes(mark: Path, signum: int) -> None:
    """The controller was interrupted: its lanes start no other trial (the stop mark), and for a signal sent to it
    alone (SIGTERM, SIGHUP: kill, timeout, CI) each lane is sent SIGTERM, which takes the suite's own interrupt path
    (its trial stopped, its stack closed). A SIGINT is left to reach them from the terminal, which sends it to the
    whole group: a second signal would make a lane kill its processes at once."""
    mark_stop(mark)
    if signum == signal.SIGINT:
        return
    for pid in child_pids():
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue


def child_pids(proc: Path = Path("/proc/self/task")) -> list[int]:
    """This process's children (its lanes, on a controller), from /proc."""
    pids: list[int] = []
    for task in proc.iterdir():
        try:
            pids += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:
            continue
    return pids


def _is_url(target: str) -> bool:
    try:
        return parse_target(target).kind == "url"
    except ValueError:  # said as a usage error when the session reads its options
        return False


def lane_of(node: Any) -> str:
    """A pytest-xdist worker's id (gw0, gw1, ...): the lane's name in the session's log and summary."""
    return str(
        getattr(node, "gateway", None) and node.gateway.id or getattr(node, "workerinput", {}).get("workerid", "")
    )


# ---------------------------------------------------------------------------------------------- the lanes' needs


class Usage:
    """What one lane's trials took of the machine: CPU seconds over wall seconds, memory and files at most."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self.rss_bytes = 0
        self.fds = 0
        self.trials = 0

    def add(self, cpu_s: float, wall_s: float, rss_bytes: int, fds: int) -> None:
        self.cpu_s += cpu_s
        self.wall_s += wall_s
        self.rss_bytes = max(self.rss_bytes, rss_bytes)
        self.fds = max(self.fds, fds)
        self.trials += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu_s": self.cpu_s,
            "wall_s": self.wall_s,
            "rss_bytes": self.rss_bytes,
            "fds": self.fds,
            "trials": self.trials,
        }


def needs_of(usages: list[dict[str, Any]]) -> LaneNeeds | None:
    """One lane's needs from every lane's usage (the busiest lane's memory and files; the cores over all trials),
    or None when no trial ran."""
    usages = [u for u in usages if u.get("trials")]
    if not usages:
        return None
    wall = sum(u["wall_s"] for u in usages)
    return LaneNeeds(
        cores=round(sum(u["cpu_s"] for u in usages) / wall, 3) if wall > 0 else 0.0,
        rss_bytes=int(max(u["rss_bytes"] + u.get("own_rss_bytes", 0) for u in usages)),
        fds=int(max(u["fds"] for u in usages)),
        trials=sum(u["trials"] for u in usages),
    )


# ---------------------------------------------------------------------------------------------- one summary


SUMMED = ("trials", "stack_starts", "judged_trials", "trial_wall_s")


def merge_summaries(parts: list[dict[str, Any]], wall_s: float, lanes: dict[str, Any]) -> dict[str, Any]:
    """The session's summary from its lanes' (each a :func:`faultload.suite.summary.summary_dict`): counts
    summed, properties and notes listed once each, the session's growth judged per lane's stack (the worst
    lane's verdict, every lane's beside it), ``wall_s`` the controller's, ``lanes`` what ran where."""
    if not parts:
        return {}
    first = parts[0]
    merged: dict[str, Any] = {key: value for key, value in first.items()}
    for key in SUMMED:
        merged[key] = round(sum(p.get(key) or 0 for p in parts), 3)
    merged["wall_s"] = round(wall_s, 1)
    phases: dict[str, float] = {}
    for part in parts:
        for name, seconds in (part.get("phases_s") or {}).items():
            phases[name] = round(phases.get(name, 0.0) + seconds, 3)
    merged["phases_s"] = phases
    load = phases.get("load", 0.0)
    merged["load_share"] = load / merged["trial_wall_s"] if merged["trial_wall_s"] else None
    invariants: dict[str, dict[str, int]] = {}
    for part in parts:
        for name, tally in (part.get("invariants") or {}).items():
            total = invariants.setdefault(name, {"judged": 0, "unknown": 0, "skipped": 0})
            for key, count in tally.items():
                total[key] = total.get(key, 0) + count
    merged["invariants"] = invariants
    merged["properties"] = [prop for part in parts for prop in part.get("properties", [])]
    merged["notes"] = list(dict.fromkeys(note for part in parts for note in part.get("notes", [])))
    growths = [p["session_growth"] for p in parts if p.get("session_growth")]
    order = {False: 0, None: 1, True: 2}
    merged["session_growth"] = min(growths, key=lambda g: order.get(g.get("ok"), 1)) if growths else None
    merged["lanes"] = lanes
    return merged
