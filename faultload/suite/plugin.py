"""``pytest faultload``: the pytest plugin (entry point ``pytest11: faultload``).

Registered for every pytest run in an environment where faultload is
installed, so importing it is cheap (stdlib and pytest only) and it does
nothing unless the suite's properties (``faultload/suite/test_*.py``) are
collected. Options::

    --faultload-target SPEC      the server under test (default skyrl==0.4.0)
    --faultload-regress NAME     undo a known fix in it (repeatable)
    --faultload-fix NAME         apply a candidate fix in it (repeatable)
    --faultload-profile NAME     ci (default, or $FAULTLOAD_PROFILE) | nightly | confirm
    --faultload-workdir DIR      faultload's folder (default .faultload or $FAULTLOAD_HOME)
    --faultload-shrink-s S       override the profile's shrink budget (seconds)
    --faultload-examples N       override the profile's examples per property
    --faultload-session-s S      override the profile's session time (no trial starts after S seconds)
    --faultload-summary-json F   write the session's results as JSON (read by ``faultload matrix``)

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
from pathlib import Path

import pytest

DEFAULT_PROFILE = "ci"
_state: dict = {"options": None, "runner": None, "config": None, "outcomes": {}}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("faultload", "faultload: property-based fault-injection and load suite")
    group.addoption("--faultload-target", default=None, metavar="SPEC",
                    help="server under test: skyrl==X.Y.Z | skyrl@PATH | url=... (default skyrl==0.4.0)")
    group.addoption("--faultload-regress", action="append", default=[], metavar="NAME",
                    help="undo a known fix in the launched server: retention, keepalive, rich-access-log "
                         "(repeatable; default none)")
    group.addoption("--faultload-fix", action="append", default=[], metavar="NAME",
                    help="apply a candidate fix in the launched server: plain-tracebacks (repeatable; default none)")
    group.addoption("--faultload-profile", default=None, choices=("ci", "nightly", "confirm"),
                    help="ci: few small derandomized examples (<= 10 min); nightly: more/larger (<= 60 min), "
                         "example database kept; confirm: the 131,072-request shape once "
                         f"(default {DEFAULT_PROFILE}, or $FAULTLOAD_PROFILE)")
    group.addoption("--faultload-workdir", default=None, metavar="DIR",
                    help="faultload's folder (default .faultload or $FAULTLOAD_HOME)")
    group.addoption("--faultload-shrink-s", default=None, type=float, metavar="S",
                    help="stop shrinking a failure after S seconds (default: the profile's)")
    group.addoption("--faultload-examples", default=None, type=int, metavar="N",
                    help="examples per property (default: the profile's)")
    group.addoption("--faultload-session-s", default=None, type=float, metavar="S",
                    help="start no trial after S seconds of the session (default: the profile's); "
                         "properties left without a judged trial then fail as not judged")
    group.addoption("--faultload-summary-json", default=None, metavar="FILE",
                    help="write each property's outcome, violated invariants and repro as JSON (default: not written)")


class SuiteOptions:
    """The plugin's options, resolved once per session (read by the properties at import)."""

    def __init__(self, config: pytest.Config | None = None) -> None:
        get = (lambda name: config.getoption(name)) if config is not None else (lambda name: None)
        from faultload.suite.profiles import get_profile
        from faultload.model.target import DEFAULT_TARGET

        profile = get_profile(get("faultload_profile") or os.environ.get("FAULTLOAD_PROFILE") or DEFAULT_PROFILE)
        import dataclasses

        examples = get("faultload_examples")
        if examples:
            profile = dataclasses.replace(profile, max_examples=max(1, examples))
        session_s = get("faultload_session_s")
        if session_s is not None:
            profile = dataclasses.replace(profile, session_s=max(0.0, session_s))
        self.profile = profile
        self.target: str = get("faultload_target") or DEFAULT_TARGET
        self.regress: tuple[str, ...] = tuple(get("faultload_regress") or ())
        self.fixes: tuple[str, ...] = tuple(get("faultload_fix") or ())
        self.workdir: str | None = get("faultload_workdir")
        self.shrink_s: float | None = get("faultload_shrink_s")
        self.rootdir = Path(str(config.rootpath)) if config is not None else Path.cwd()

    def workspace(self):
        from faultload.workspace import Workspace

        return Workspace(Path(self.workdir).resolve()) if self.workdir else Workspace.default()

    def pyproject(self) -> Path | None:
        path = self.rootdir / "pyproject.toml"
        return path if path.is_file() else None


def options() -> SuiteOptions:
    """The session's options, read from pytest's config when there is one (defaults for a bare import).

    Resolved on first use, so an option given alone (``--faultload-examples``,
    ``--faultload-workdir``, ...) applies however the properties were collected:
    ``pytest faultload``, ``pytest --pyargs faultload.suite`` or a user's own
    property file.
    """
    if _state["options"] is None:
        _state["options"] = SuiteOptions(_state.get("config"))
    return _state["options"]


def runner(executor=None):
    """The session's SuiteRunner, made on first use (starting nothing until the first trial).

    ``executor``: what the runner runs trials with when this call makes it
    (None: the real shared stack); the ``faultload_executor`` fixture's value.
    """
    if _state["runner"] is None:
        from faultload.checker.budgets import load_budgets
        from faultload.suite.runner import SuiteRunner
        from faultload.watchdog import load_watchdog_limits

        opts = options()
        pyproject = opts.pyproject()
        _state["runner"] = SuiteRunner(
            opts.profile, opts.target, opts.regress, opts.workspace(), load_budgets(pyproject), fixes=opts.fixes,
            watchdog=load_watchdog_limits(pyproject), shrink_s=opts.shrink_s, log=_terminal_log(),
            executor=executor,
        )
        # SIGTERM and SIGHUP take pytest's Ctrl-C path too, so the session's stack is
        # closed; a second signal kills every child process at once.
        from faultload.procutil import Interrupts

        _state["interrupts"] = Interrupts(pytest.ExitCode.INTERRUPTED, name="faultload suite").install()
    elif executor is not None and _state["runner"].executor is not executor:
        raise RuntimeError("faultload: the session's runner was made before faultload_executor gave its executor")
    return _state["runner"]


def _terminal_log():
    """Progress lines straight to the terminal (pytest captures the tests' own stdout/stderr)."""
    config = _state.get("config")
    reporter = config.pluginmanager.get_plugin("terminalreporter") if config is not None else None
    if reporter is None:
        return None

    capture = config.pluginmanager.get_plugin("capturemanager")

    def log(message: str) -> None:
        if capture is not None:
            with capture.global_and_fixture_disabled():
                reporter.ensure_newline()
                reporter.write_line(f"faultload: {message}")
        else:
            reporter.ensure_newline()
            reporter.write_line(f"faultload: {message}")

    return log


def _is_property(item: pytest.Item) -> bool:
    return "faultload_suite" in getattr(item, "fixturenames", ())


def _write_summary(path: Path) -> None:
    """The session's results as JSON, written even when no property ran (an empty list says so)."""
    import json

    runner_ = _state["runner"]
    if runner_ is not None:
        data = runner_.summary_dict(_state["outcomes"])
    else:
        opts = options()
        data = {"profile": opts.profile.name, "target": opts.target, "regress": list(opts.regress),
                "fixes": list(opts.fixes), "trials": 0, "wall_s": 0.0, "stack_starts": 0,
                "judged_trials": 0, "invariants": {}, "properties": []}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    _state["outcomes"] = {}
    _state["options"] = None
    _state["runner"] = None
    _state["config"] = config


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.getoption("faultload_summary_json", None)
    if path:
        _write_summary(Path(path))
    if _state["runner"] is not None:
        _state["runner"].close()
    _state["runner"] = None
    if _state.get("interrupts") is not None:
        _state.pop("interrupts").uninstall()
    _state["options"] = None
    _state["config"] = None


@pytest.fixture(scope="session")
def faultload_executor():
    """What runs and judges each trial: None, the real shared stack. Override it (a session fixture
    of this name in a conftest) to give the properties another Executor."""
    return None


@pytest.fixture(scope="session")
def faultload_suite(faultload_executor):
    """The session's :class:`~faultload.suite.runner.SuiteRunner` (one shared stack)."""
    suite = runner(faultload_executor)
    yield suite
    suite.close()


def pytest_collection_finish(session: pytest.Session) -> None:
    _state["property_ids"] = [
        item.nodeid for item in session.items
        if _is_property(item) and not any(m.args and m.args[0] is True for m in item.iter_markers("skipif"))
    ]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if not _is_property(item):
        return (yield)
    suite = runner()
    ids = _state.get("property_ids") or []
    remaining = len(ids) - ids.index(item.nodeid) - 1 if item.nodeid in ids else 0
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
    if _is_property(item) and call.when == "call":
        _state["outcomes"][item.nodeid] = report.outcome
    elif _is_property(item) and report.failed:  # setup or teardown failed: not a verdict on the target
        _state["outcomes"][item.nodeid] = "error"
    if call.when != "call" or not _is_property(item) or _state["runner"] is None:
        return
    suite = _state["runner"]
    state = suite.states.get(item.nodeid)
    if state is None:
        return
    lines = []
    if report.failed and state.best is not None:
        seed = getattr(getattr(item, "obj", None), "_hypothesis_internal_use_generated_seed", None)
        path = suite.write_repro(state, hypothesis_seed=seed)
        config, _ = state.best
        lines += [
            f"repro: {path}",
            f"replay: faultload replay {path}",
            f"shrunk from {state.first_failure_requests} to {config.shape.requests} requests in "
            f"{state.shrink_seconds:.0f}s ({state.failures} failing examples"
            + (", cut by the shrink budget)" if state.shrink_cut else ")"),
        ]
    lines.append(f"{state.trials} trials run, {state.cached} cached, {state.not_run} not run (time bound), "
                 f"{state.judged_trials} judged")
    if state.tally:
        from faultload.suite.state import tally_text

        lines.append(tally_text(state.tally))
    report.sections.append(("faultload", "\n".join(lines)))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    suite = _state["runner"]
    if suite is None or not suite.states:
        return
    terminalreporter.section("faultload")
    for line in suite.summary_lines():
        terminalreporter.write_line(line)
