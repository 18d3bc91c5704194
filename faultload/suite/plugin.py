"""``pytest faultload``: the pytest plugin (entry point ``pytest11: faultload``).

Registered for every pytest run in an environment where faultload is
installed, so importing it is cheap (stdlib and pytest only) and it does
nothing unless the suite's properties (``faultload/suite/test_*.py``) are
collected. Options::

    --faultload-target SPEC      the server under test (default skyrl==0.4.0)
    --faultload-regress NAME     undo a known fix in it (repeatable)
    --faultload-fix NAME         apply a candidate fix in it (repeatable)
    --faultload-sdk tinker==X.Y.Z  the SDK release the real-SDK trials run (its own folder, installed when missing)
    --faultload-profile NAME     ci (default, or $FAULTLOAD_PROFILE) | nightly | confirm
    --faultload-workdir DIR      faultload's folder (default .faultload or $FAULTLOAD_HOME)
    --faultload-shrink-s S       override the profile's shrink budget (seconds)
    --faultload-examples N       override the profile's examples per property
    --faultload-session-s S      override the profile's session time (no trial starts after S seconds)
    --faultload-summary-json F   write the session's results as JSON (read by ``faultload matrix``)
    --faultload-html F           write the session's results as one self-contained HTML page
    --faultload-ray HOST:PORT    each trial's load workers as actors on that Ray cluster (auto: $RAY_ADDRESS)
    --faultload-baseline BUILD   add the comparative property: each example on BUILD too, the session's
                                 target (with its switches) must be no worse (faultload.suite.comparative)

Each session's state (options, runner, outcomes) is a
:class:`~faultload.suite.session.SuiteSession` on its own ``config.stash``
(:func:`session`), made on first use (at ``pytest_configure`` when
``--faultload-baseline``, ``--faultload-sdk`` or ``--faultload-ray`` is given, so a bad build, SDK release or
cluster is a usage error); the
environment (``FAULTLOAD_PROFILE``, ``FAULTLOAD_HOME``, and for ``--faultload-ray`` ``RAY_ADDRESS`` and
``PYTHONPATH``) is read here, in ``pytest_configure``, and handed to it as
values. Properties carry the ``faultload`` marker (``-m faultload`` selects
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
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from faultload.cli.exits import EXIT_FAILED, EXIT_HARNESS
from faultload.host.workspace import output_folder_problem
from faultload.suite.defaults import PROFILE_VARIABLE
from faultload.suite.errors import SuiteError
from faultload.suite.options import add_build_options, add_outside_options, add_session_options

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
# The pytest config collecting a module now: a property's decorators run at its import and read
# their session's settings through it (collecting()); set only while one module is collected.
_COLLECTING: ContextVar[pytest.Config | None] = ContextVar("faultload_collecting", default=None)


def pytest_addoption(parser: pytest.Parser) -> None:
    """The suite's options, in one group, in the order ``pytest --help`` lists them."""
    group = parser.getgroup("faultload", "faultload: property-based fault-injection and load suite")
    add_build_options(group)
    add_session_options(group)
    add_outside_options(group)


def session(config: pytest.Config) -> SuiteSession:
    """The session's faultload state, made on its first use (``config.stash``: one per session)."""
    found = config.stash.get(_SESSION, None)
    if found is None:
        # The one import of the suite's machinery (Hypothesis, the runner, the stack): this module is
        # loaded by every pytest run in the environment, so only a session that uses faultload pays it.
        from faultload.suite.session import SuiteSession  # local import: every pytest run in the env loads this plugin

        found = config.stash[_SESSION] = SuiteSession(config, config.stash.get(_ENVIRON, {}))
    return found


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
    summary_json, html = config.getoption("faultload_summary_json", None), config.stash.get(_HTML, None)
    if summary_json or html:
        session(config).write_reports(Path(summary_json) if summary_json else None, html)
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
def pytest_runtest_call(item: pytest.Item):
    if not _is_property(item):
        return (yield)
    found = session(item.config)
    suite = found.runner()
    ids = found.property_ids
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
    harness = found is not None and "error" in found.outcomes.values()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    failed = reporter is None or bool(reporter.stats.get("failed"))  # any test's failure, a property's or not
    if exitstatus == EXIT_FAILED and harness and not failed:
        session.exitstatus = EXIT_HARNESS


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    found = _made(config)
    suite = found.suite if found is not None else None
    if suite is None or not suite.states:
        return
    terminalreporter.section("faultload")
    for line in suite.summary_lines():
        terminalreporter.write_line(line)
