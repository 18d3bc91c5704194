"""``pytest faultload``: the pytest plugin (entry point ``pytest11: faultload``).

Registered for every pytest run in an environment where faultload is
installed, so importing it is cheap (stdlib and pytest only) and it does
nothing unless the suite's properties (``faultload/suite/test_*.py``) are
collected. Its options (``pytest --help``, group faultload; docs/reference/pytest-options.md) are
declared in :mod:`faultload.suite.options`.

Each session's state (options, runner, outcomes) is a
:class:`~faultload.suite.session.SuiteSession` on its own ``config.stash``
(:func:`session`), made on first use (at ``pytest_configure`` when
``--faultload-baseline``, ``--faultload-base``, ``--faultload-sdk`` or ``--faultload-ray`` is given, so a bad build, base, SDK release or
cluster is a usage error); the
environment (``FAULTLOAD_PROFILE``, ``FAULTLOAD_HOME``, and for ``--faultload-ray`` ``RAY_ADDRESS`` and
``PYTHONPATH``) is read here, in ``pytest_configure`` (and ``FAULTLOAD_HOME`` in ``pytest_cmdline_main``,
for the workspace whose lanes it counts), and handed to it as values. Properties carry the ``faultload`` marker (``-m faultload`` selects
them, ``-m "not faultload"`` leaves them out), registered with pytest so
``--strict-markers`` passes; their Hypothesis settings are the registered
profile ``faultload-<profile>`` (see :mod:`faultload.suite.session`).

The session fixture ``faultload_suite`` is the :class:`~faultload.suite.runner.SuiteRunner`
(one shared stack, started on first use). What runs and judges each trial is
the session fixture ``faultload_executor``: ``None``, the real shared stack
(:class:`~faultload.suite.executor.StackExecutor`); a conftest may override it
with any :class:`~faultload.suite.executor.Executor` (``tests/quality`` does,
with an executor whose failures are known in advance). On a failing property the plugin
writes its repro (``.faultload/repros/*.json`` with the JSON report and PNG
beside it), adds it to the failure report and lists every repro with its
``faultload replay FILE`` command at the end of the run.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from faultload.cli.exits import EXIT_FAILED, EXIT_HARNESS
from faultload.host.workspace import output_folder_problem
from faultload.suite.defaults import PROFILE_VARIABLE
from faultload.suite.errors import SuiteError
from faultload.suite.lanes import (
    choose_lanes,
    collection_turn,
    forward_interrupts,
    lane_of,
    mark_stop,
    stop_mark,
    workspace_of,
)
from faultload.suite.options import (
    add_build_options,
    add_outside_options,
    add_report_options,
    add_session_options,
    report_files,
)

if TYPE_CHECKING:
    from faultload.suite.session import SuiteSession

# The variables the plugin reads (only in pytest_configure), and what for.
ENVIRONMENT = {
    PROFILE_VARIABLE: "the profile when --faultload-profile is not given",
    "FAULTLOAD_HOME": "faultload's folder when --faultload-workdir is not given (else .faultload)",
    "TINKER_API_KEY": "a url= target's API key when --faultload-api-key is not given (as the tinker SDK reads it)",
    "RAY_ADDRESS": "the cluster of --faultload-ray auto",
    "PYTHONPATH": "--faultload-ray: passed on to the load worker actors on a loopback cluster, after this faultload's "
    "own folder",
}
MARKER = "faultload: a faultload property (runs trials on the session's shared stack; uses faultload_suite)"

_ENVIRON = pytest.StashKey[Mapping[str, str]]()
_HTML = pytest.StashKey[Path]()  # --faultload-html, once its folder was found writable
_SESSION = pytest.StashKey["SuiteSession"]()
_LANES = pytest.StashKey["LaneRun"]()  # the controller of a session of lanes: its lanes and what they reported
_CHOSEN = pytest.StashKey["Lanes"]()  # the lanes the plugin chose for a session of the suite's properties
_STOP = pytest.StashKey[Path]()  # where the controller marks that its lanes should stop (-x)
_FAILURES = pytest.StashKey[int]()
_MAXFAIL_STOPPED = pytest.StashKey[bool]()  # the controller stopped its lanes for -x, not for an interrupt
_PREVIOUS_HANDLERS = pytest.StashKey[dict[int, Any]]()  # the controller's signal handlers before its lanes'
_STARTED = pytest.StashKey[float]()  # time.monotonic() at the session's start (a controller's wall)
# The config of the controller of lanes this process is (pytest_runtest_logreport is given no config)
_CONTROLLER: ContextVar[pytest.Config | None] = ContextVar("faultload_controller", default=None)
_LAST_ON_LANE = pytest.StashKey[bool]()  # a lane's property after which the lane runs no other
# The pytest config collecting a module now: a property's decorators run at its import and read
# their session's settings through it (collecting()); set only while one module is collected.
_COLLECTING: ContextVar[pytest.Config | None] = ContextVar("faultload_collecting", default=None)


def pytest_addoption(parser: pytest.Parser) -> None:
    """The suite's options, in one group, in the order ``pytest --help`` lists them."""
    group = parser.getgroup("faultload", "faultload: property-based fault-injection and load suite")
    add_build_options(group)
    add_session_options(group)
    add_report_options(group)
    add_outside_options(group)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config):
    """Before pytest-xdist reads ``-n``: a session of the suite's properties runs them on as many lanes as this
    machine holds (``--faultload-lanes``, auto by default; an explicit ``-n`` wins)."""
    if not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("xdist"):
        environ = environment(os.environ)
        lanes = choose_lanes(config, environ, Path(__file__).resolve().parent.parent)
        if lanes is not None:
            config.stash[_CHOSEN] = lanes
            config.stash[_STOP] = stop_mark(workspace_of(config, environ))
            _CONTROLLER.set(config)
    return (yield)


def session(config: pytest.Config) -> SuiteSession:
    """The session's faultload state, made on its first use (``config.stash``: one per session)."""
    found = config.stash.get(_SESSION, None)
    if found is None:
        found = config.stash[_SESSION] = _machinery().SuiteSession(config, config.stash.get(_ENVIRON, {}))
    return found


def _machinery():
    """The suite's machinery (Hypothesis, the runner, the stack): this module is loaded by every pytest run in the
    environment, so only a session that uses faultload pays for importing it."""
    import faultload.suite.session as machinery  # local import: every pytest run in the env loads this plugin

    return machinery


def collecting() -> SuiteSession:
    """The session of the pytest run importing a property module now (its decorators run at import)."""
    config = _COLLECTING.get()
    if config is None:
        raise RuntimeError(
            "faultload: the suite's properties are collected by pytest (pytest faultload, "
            "pytest --pyargs faultload.suite), not imported on their own"
        )
    return session(config)


def _is_property(item: pytest.Item) -> bool:
    return "faultload_suite" in getattr(item, "fixturenames", ())


def _made(config: pytest.Config) -> SuiteSession | None:
    """The session's faultload state if something used faultload (None: make nothing)."""
    return config.stash.get(_SESSION, None)


@pytest.hookimpl(trylast=True)  # after Hypothesis's plugin loads --hypothesis-profile: a session made here sees it
def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STARTED] = time.monotonic()
    config.addinivalue_line("markers", MARKER)
    config.stash[_ENVIRON] = environment(os.environ)
    html = config.getoption("faultload_html", None)
    for option in ("faultload_html", "faultload_summary_json"):
        path = config.getoption(option, None)
        problem = output_folder_problem(path) if path else None
        if problem:  # said now, not after a session of minutes
            raise pytest.UsageError(f"--{option.replace('_', '-')}: {problem}")
    if html:
        config.stash[_HTML] = Path(html)
    # a bad target, switch, build spec, SDK release or cluster address is a usage error now, not at collection
    if any(
        config.getoption(name, None)
        for name in (
            "faultload_target",
            "faultload_regress",
            "faultload_fix",
            "faultload_baseline",
            "faultload_base",
            "faultload_ray",
            "faultload_sdk",
            "faultload_api_key",
            "faultload_header",
            "faultload_ca_cert",
        )
    ):
        session(config)


def environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The faultload variables of ``environ``: the only place the plugin reads the environment."""
    return {name: environ[name] for name in ENVIRONMENT if environ.get(name)}


def pytest_unconfigure(config: pytest.Config) -> None:
    files = report_files(config, config.stash.get(_HTML, None))
    lanes = config.stash.get(_LANES, None)
    if lanes is not None:  # the controller: its lanes' summaries, merged
        lanes.finish(files)
    elif files.wanted and not hasattr(config, "workerinput"):  # a lane reports to its controller
        session(config).write_reports(files)
    stop = config.stash.get(_STOP, None)
    if stop is not None:
        stop.unlink(missing_ok=True)
        for sig, handler in config.stash.get(_PREVIOUS_HANDLERS, {}).items():
            signal.signal(sig, handler)
        if _CONTROLLER.get() is config:
            _CONTROLLER.set(None)
    found = _made(config)
    if found is not None:
        found.close()
        del config.stash[_SESSION]


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """While a module is collected (imported), :func:`collecting` gives its decorators this session."""
    if not isinstance(collector, pytest.Module):
        return (yield)
    token = _COLLECTING.set(collector.config)
    try:
        return (yield)
    finally:
        _COLLECTING.reset(token)


@pytest.fixture(scope="session")
def faultload_executor():
    """What runs and judges each trial: None, the real shared stack. Override it (a session fixture
    of this name in a conftest) to give the properties another Executor."""
    return None


@pytest.fixture(scope="session")
def faultload_suite(request: pytest.FixtureRequest, faultload_executor):
    """The session's :class:`~faultload.suite.runner.SuiteRunner` (one shared stack)."""
    suite = session(request.config).runner(faultload_executor)
    yield suite
    suite.close()


@pytest.hookimpl(tryfirst=True)  # before -m deselects: `-m faultload` selects a user's properties too
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_property(item) and item.get_closest_marker("faultload") is None:
            item.add_marker("faultload")


def pytest_collection_finish(session: pytest.Session) -> None:
    found = _made(session.config)
    if found is not None:
        found.property_ids = [
            item.nodeid
            for item in session.items
            if _is_property(item) and not any(m.args and m.args[0] is True for m in item.iter_markers("skipif"))
        ]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """On a lane, the item after which nothing comes is its last (pytest-xdist holds a lane's last item back
    until it knows no other follows)."""
    item.stash[_LAST_ON_LANE] = nextitem is None
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if not _is_property(item):
        return (yield)
    found = session(item.config)
    suite = found.runner()
    ids = found.property_ids
    remaining = len(ids) - ids.index(item.nodeid) - 1 if item.nodeid in ids else 0
    if hasattr(item.config, "workerinput"):  # a lane runs some of them, told one at a time: is this its last?
        remaining = 0 if item.stash.get(_LAST_ON_LANE, False) else 1
    suite.begin(item.nodeid, remaining)
    try:
        result = yield
    finally:
        suite.end()
    reason = suite.not_judged(item.nodeid)
    if reason:  # a property that judged none of its invariants is a green that proves nothing
        pytest.fail(reason, pytrace=False)
    return result


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    found = _made(item.config) if _is_property(item) else None
    if found is None:
        return
    if call.when == "call" and report.failed and call.excinfo is not None and call.excinfo.errisinstance(SuiteError):
        # The harness failed, not the target: an error (pytest's E, JUnit's <error>, which pytest gives only
        # outside the call phase), never a failure; the session then exits with the harness code.
        report.when = "setup"
        found.outcomes[item.nodeid] = "error"
    elif call.when == "call":
        found.outcomes[item.nodeid] = report.outcome
    elif report.failed:  # setup or teardown failed: not a verdict on the target
        found.outcomes[item.nodeid] = "error"
    if call.when == "call":
        section = found.failure_section(item, report)
        if section is not None:
            report.sections.append(("faultload", section))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A session whose only bad outcomes are harness errors exits with the harness code, so a CI job can
    retry the rig's failures and not the server's (pytest's own 1 for both otherwise)."""
    found = _made(session.config)
    lanes = session.config.stash.get(_LANES, None)
    if exitstatus == pytest.ExitCode.INTERRUPTED and session.config.stash.get(_MAXFAIL_STOPPED, False):
        exitstatus = session.exitstatus = EXIT_FAILED  # pytest-xdist ends -x as an interrupt: it is a failure
    if hasattr(session.config, "workerinput") and found is not None:  # a lane: its summary to the controller
        session.config.workeroutput["faultload"] = found.lane_report()
    outcomes = lanes.outcomes() if lanes is not None else found.outcomes if found is not None else {}
    harness = "error" in outcomes.values()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    failed = reporter is None or bool(reporter.stats.get("failed"))  # any test's failure, a property's or not
    if exitstatus == EXIT_FAILED and harness and not failed:
        session.exitstatus = EXIT_HARNESS


def pytest_sessionstart(session: pytest.Session) -> None:
    """On the controller of lanes, an interrupt reaches the lanes (:func:`faultload.suite.lanes.interrupt_lanes`);
    the handlers it replaces come back at the session's end."""
    stop = session.config.stash.get(_STOP, None)
    if stop is not None and threading.current_thread() is threading.main_thread():
        interrupted = lambda: session.config.stash.__setitem__(_MAXFAIL_STOPPED, False)  # noqa: E731 - not -x
        session.config.stash[_PREVIOUS_HANDLERS] = forward_interrupts(stop, interrupted)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    """A lane of the suite collects its properties at a turn of the machine (:func:`lanes.collection_turn`)."""
    config = session.config
    if "faultload_stop" not in getattr(config, "workerinput", {}):
        return (yield)
    with collection_turn(config, config.stash.get(_ENVIRON, {})):
        return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """A lane of lanes the plugin chose is told where its session's stop mark would be (``-x``)."""
    stop = node.config.stash.get(_STOP, None)
    if stop is not None:
        node.workerinput["faultload_stop"] = str(stop)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """On the controller of lanes under ``-x`` (``--maxfail``): once a property failed, the other lanes start no
    more trials (pytest-xdist lets each finish the property it runs; its examples left are not run)."""
    config = _CONTROLLER.get()
    stop = config.stash.get(_STOP, None) if config is not None else None
    if stop is None or not report.failed:
        return
    failures = config.stash[_FAILURES] = config.stash.get(_FAILURES, 0) + 1
    maxfail = int(config.getoption("maxfail", 0) or 0)
    if maxfail and failures >= maxfail:
        mark_stop(stop)
        config.stash[_MAXFAIL_STOPPED] = True


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """A lane ended: keep what it reported (its summary, its lines, its trials' usage of the machine). The
    controller's record is made by the first lane that ran faultload (or by any lane of lanes the plugin chose),
    so a pytest-xdist run of other tests loads none of the suite's machinery."""
    config = node.config
    report = getattr(node, "workeroutput", {}).get("faultload")
    lanes = config.stash.get(_LANES, None)
    if lanes is None and (report is not None or _CHOSEN in config.stash):
        workers = int(getattr(config.option, "numprocesses", 0) or 0)
        environ = config.stash.get(_ENVIRON, {})
        lanes = config.stash[_LANES] = _machinery().LaneRun(
            config.stash.get(_CHOSEN, None), workers, workspace_of(config, environ), config.stash[_STARTED]
        )
    if lanes is not None:
        lanes.add(lane_of(node), report, error)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    lanes = config.stash.get(_LANES, None)
    if lanes is not None:
        lines = lanes.summary_lines()
        if lines:
            terminalreporter.section("faultload")
            for line in lines:
                terminalreporter.write_line(line)
        return
    found = _made(config)
    suite = found.suite if found is not None else None
    if suite is None or not suite.states:
        return
    terminalreporter.section("faultload")
    for line in suite.summary_lines():
        terminalreporter.write_line(line)
