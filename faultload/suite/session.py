"""One pytest session's faultload: its options as values, its Hypothesis profiles, its runner.

The plugin (:mod:`faultload.suite.plugin`) is imported by every pytest run in
the environment, so it holds hooks only; this module holds what a session
that uses faultload needs (Hypothesis, the runner and, through it, the stack)
and is imported by the plugin once, when a session first uses faultload. Each
session keeps its :class:`SuiteSession` on its own ``config.stash``: two
sessions in one process (pytester) share nothing.

Settings arrive as values: the environment (``FAULTLOAD_PROFILE``,
``FAULTLOAD_HOME``) is read by the plugin's ``pytest_configure`` and handed
here as a mapping; the settings file is found by
:func:`faultload.host.settings.find_config` from pytest's rootdir.

**Hypothesis profiles.** Each suite profile (:mod:`faultload.suite.profiles`)
is registered as the Hypothesis profile ``faultload-<name>``
(``faultload-ci``, ``faultload-nightly``, ``faultload-confirm``) holding the
suite's settings (examples, derandomize, example database, no deadline,
phases, health checks, one bug, blobs), on top of the profile loaded when the
session is made — Hypothesis's own (``default``, or ``ci``, which Hypothesis
loads itself when it sees a CI environment), or yours (``--hypothesis-profile``, or a
``settings.load_profile`` in a conftest) — so the settings the suite does not
set (verbosity, ``--hypothesis-verbosity``, stateful steps, backend) are
yours. The suite's properties are built on the chosen one; it is loaded for
the rest of the session when you loaded no profile of your own (so a property
of yours decorated after that takes the suite's settings for what its own
``@settings`` leaves out), and the previous profile is loaded again at the
session's end. An ``@settings`` decorator always wins over a profile.
"""

from __future__ import annotations

import resource
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from faultload.checker.budgets import load_budgets
from faultload.cluster.connect import ClusterError
from faultload.cluster.session import RayCluster, join
from faultload.host.admission import Admission
from faultload.host.lanes import write_needs
from faultload.host.processes import Interrupts
from faultload.host.workspace import Workspace
from faultload.run.watchdog import load_watchdog_limits
from faultload.suite.lane_run import LaneRun  # noqa: F401 - the plugin reaches the controller's machinery here
from faultload.suite.lanes import admission_for, lane_log, lane_of, needs_of
from faultload.suite.options import ReportFiles
from faultload.suite.profiles import PROFILES, Profile
from faultload.suite.properties import Property, property_examples
from faultload.suite.runner import SuiteRunner
from faultload.suite.session_options import SuiteOptions, suite_cluster_error
from faultload.suite.state import tally_text
from faultload.suite.summary import write_summary

FULL_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
NO_SHRINK_PHASES = (Phase.explicit, Phase.reuse, Phase.generate)
# The profiles Hypothesis loads by itself: ``default``, and ``ci`` when it sees a CI environment variable
# (``CI``, ``GITHUB_ACTIONS``, ...). Either loaded means you loaded none: the suite's own is loaded.
HYPOTHESIS_OWN_PROFILES = frozenset({"default", "ci"})


def hypothesis_profile_name(profile: Profile) -> str:
    return f"faultload-{profile.name}"


def hypothesis_settings(profile: Profile, workspace: Workspace) -> dict[str, Any]:
    """The Hypothesis settings a suite profile stands for (keyword arguments of ``settings``)."""
    database = None
    if profile.use_database and not profile.derandomize:
        database = DirectoryBasedExampleDatabase(str(workspace.root / "hypothesis"))
    phases = NO_SHRINK_PHASES if profile.confirm or profile.shrink_s <= 0 else FULL_PHASES
    return {
        "max_examples": profile.max_examples,
        "derandomize": profile.derandomize,
        "database": database,
        "deadline": None,
        "phases": phases,
        "suppress_health_check": list(HealthCheck),
        "report_multiple_bugs": False,
        "print_blob": True,
    }


def register_hypothesis_profiles(chosen: Profile, workspace: Workspace) -> None:
    """Register every suite profile as ``faultload-<name>`` on top of the profile loaded now
    (``chosen``, with the session's --faultload-examples/--faultload-session-s, in place of its own)."""
    parent = settings.default
    for profile in PROFILES.values():
        profile = chosen if profile.name == chosen.name else profile
        settings.register_profile(
            hypothesis_profile_name(profile), parent=parent, **hypothesis_settings(profile, workspace)
        )


def join_suite_cluster(address: str, environ: Mapping[str, str]) -> RayCluster:
    """The session's Ray cluster: every node on loopback, as the stack the suite launches is."""
    try:
        return join(address, allow_remote=False, target_loopback=True, environ=environ)
    except ClusterError as exc:
        raise pytest.UsageError(suite_cluster_error(exc)) from None


class SuiteSession:
    """What one pytest session knows about faultload: options, Hypothesis profile, runner, outcomes."""

    def __init__(self, config: pytest.Config | None, environ: Mapping[str, str]) -> None:
        self.config = config
        self.options = SuiteOptions(config, environ)
        self.outcomes: dict[str, str] = {}
        self.property_ids: list[str] = []
        self.suite: SuiteRunner | None = None
        self.cluster: RayCluster | None = None  # --faultload-ray's, joined with the runner
        self._interrupts: Interrupts | None = None
        # Hypothesis's profiles are process-wide: what was loaded is loaded again by close().
        self._loaded_before = (settings.get_current_profile_name(), settings.default)
        register_hypothesis_profiles(self.options.profile, self.options.workspace())
        chose_own = config is not None and config.getoption("hypothesis_profile", None)
        if not chose_own and self._loaded_before[0] in HYPOTHESIS_OWN_PROFILES:
            settings.load_profile(hypothesis_profile_name(self.options.profile))

    # ------------------------------------------------------------------ what the properties read

    @property
    def profile(self) -> Profile:
        return self.options.profile

    def settings_for(self, prop: Property) -> settings:
        """A property's Hypothesis settings: the session's ``faultload-<profile>`` with its examples."""
        parent = settings.get_profile(hypothesis_profile_name(self.profile))
        return settings(parent, max_examples=property_examples(self.profile, prop))

    # ------------------------------------------------------------------ the runner

    def runner(self, executor=None) -> SuiteRunner:
        """The session's SuiteRunner, made on first use (starting nothing until the first trial).

        ``executor``: what the runner runs trials with when this call makes it
        (None: the real shared stack); the ``faultload_executor`` fixture's value.
        """
        if self.suite is None:
            opts = self.options
            pyproject = opts.pyproject()
            if opts.ray is not None and executor is None:
                self.cluster = join_suite_cluster(opts.ray, opts.ray_environ)
            self.suite = SuiteRunner(
                opts.profile,
                opts.target,
                opts.regress,
                opts.workspace(),
                load_budgets(pyproject),
                fixes=opts.fixes,
                watchdog=load_watchdog_limits(pyproject),
                shrink_s=opts.shrink_s,
                log=self._terminal_log(),
                executor=executor,
                baseline=opts.baseline,
                compare_settings=opts.compare_settings,
                pools=self.cluster.pool if self.cluster is not None else None,
                access=opts.access,
                admission=self._admission(),
                lane=self.lane,
                base=opts.base,
                baseline_missing=opts.baseline_missing,
            )
            if self.lane and self.config.workerinput.get("faultload_stop"):
                self.suite.stop_file = Path(self.config.workerinput["faultload_stop"])
            if opts.baseline_note and not opts.baseline_missing:  # a missing one is its property's error
                self.suite.note(f"target {opts.target}: {opts.baseline_note}")
            # SIGTERM and SIGHUP take pytest's Ctrl-C path too, so the session's stack is
            # closed; a second signal kills every child process at once.
            self._interrupts = Interrupts(pytest.ExitCode.INTERRUPTED, name="faultload suite").install()
        elif executor is not None and self.suite.executor is not executor:
            raise RuntimeError("faultload: the session's runner was made before faultload_executor gave its executor")
        return self.suite

    @property
    def lane(self) -> str:
        """This session's lane (a pytest-xdist worker's id), or "" when it is the only one."""
        return lane_of(self.config) if self.config is not None and hasattr(self.config, "workerinput") else ""

    def _admission(self) -> Admission:
        """The machine's turns, shared by every session in the workspace (:func:`lanes.admission_for`)."""
        workercount = int(self.config.workerinput.get("workercount", 1)) if self.lane else None
        return admission_for(self.options.workspace(), self.profile.session_s + self.profile.shrink_s, workercount)

    def lane_report(self) -> dict[str, Any]:
        """What a lane tells its controller when it ends: its summary, its terminal lines, its trials' usage."""
        usage = self.suite.usage.to_dict() if self.suite is not None else {}
        if usage:
            usage["own_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return {
            "summary": self.summary(),
            "lines": self.suite.summary_lines() if self.suite is not None and self.suite.states else [],
            "usage": usage,
        }

    def _terminal_log(self) -> Callable[[str], None] | None:
        """Progress lines straight to the terminal (pytest captures the tests' own stdout/stderr); a lane's to its
        stderr, which pytest-xdist passes to the controller's terminal, each line named by its lane."""
        config = self.config
        if self.lane:
            return lane_log(self.lane, config.pluginmanager.get_plugin("capturemanager"))
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

    # ------------------------------------------------------------------ reporting

    def failure_section(self, item: pytest.Item, report: pytest.TestReport) -> str | None:
        """The ``faultload`` section of a property's report: its repro (written here when it failed),
        the replay command, how far shrinking got and what its trials judged."""
        state = self.suite.states.get(item.nodeid) if self.suite is not None else None
        if state is None:
            return None
        lines = []
        if report.failed and state.best is not None:
            seed = getattr(getattr(item, "obj", None), "_hypothesis_internal_use_generated_seed", None)
            path = self.suite.write_repro(state, hypothesis_seed=seed)
            config, _ = state.best
            lines += [
                f"repro: {path}",
                f"replay: faultload replay {path}",
                f"shrunk from {state.first_failure_requests} to {config.shape.requests} requests in "
                f"{state.shrink_seconds:.0f}s ({state.failures} failing examples"
                + (", cut by the shrink budget)" if state.shrink_cut else ")"),
            ]
        lines.append(
            f"{state.trials} trials run, {state.cached} cached, {state.not_run} not run (time bound), "
            f"{state.judged_trials} judged"
        )
        if state.tally:
            lines.append(tally_text(state.tally))
        return "\n".join(lines)

    def write_reports(self, files: ReportFiles) -> None:
        """The session's results as JSON, as a page and as Markdown (:class:`ReportFiles`), from one summary."""
        write_summary(self.summary(), files)

    def summary(self) -> dict[str, Any]:
        """The session's results as data, even when no property ran (an empty list says so)."""
        if self.suite is not None:
            data = self.suite.summary_dict(self.outcomes)
        else:
            opts = self.options
            data = {
                "profile": opts.profile.name,
                "target": opts.target,
                "regress": list(opts.regress),
                "fixes": list(opts.fixes),
                "baseline": opts.baseline.text if opts.baseline is not None else None,
                "base": opts.base,
                "trials": 0,
                "wall_s": 0.0,
                "stack_starts": 0,
                "phases_s": {},
                "trial_wall_s": 0.0,
                "load_share": None,
                "judged_trials": 0,
                "invariants": {},
                "properties": [],
            }
        return data

    def close(self) -> None:
        """Close the runner (and its stack), uninstall the signal handlers, load the previous Hypothesis profile;
        a session of one lane records what its trials took of the machine (a lane's controller does for its)."""
        if self.suite is not None:
            self.suite.close()
            needs = needs_of([self.suite.usage.to_dict()]) if not self.lane else None
            if needs is not None:
                write_needs(self.options.workspace().root, needs)
        self.suite = None
        if self.cluster is not None:  # after the runner: its last trial's actors are gone with it
            self.cluster.close()
            self.cluster = None
        if self._interrupts is not None:
            self._interrupts.uninstall()
            self._interrupts = None
        if self._loaded_before is not None:
            name, loaded = self._loaded_before
            if settings.get_profile(name) is not loaded:  # a nested session re-registered it
                settings.register_profile(name, loaded)
            settings.load_profile(name)
            self._loaded_before = None
