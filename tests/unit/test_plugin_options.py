"""pytester tests of the faultload plugin's options: each one given alone takes effect, however the
properties were collected (``pytest --pyargs faultload.suite`` or a user's own property file).

Each session is an in-process pytest run (``pytester.runpytest_inprocess``)
with ``--collect-only``: no trial runs, nothing starts. A probe plugin
(``-p probe``) records, once collection is done, what the plugin resolved
(the session's ``plugin.session(config)``: its options and its runner, which
starts nothing until a trial) and the collected properties' Hypothesis
settings. pytester removes the modules a run imported
(``faultload.suite.test_properties`` is imported afresh by each), and the
plugin keeps its state on each run's own config, so this session's is untouched.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

import faultload.suite.session  # noqa: F401  loaded in this process first: pytester's runs drop what they import, and numpy loads once per process
from faultload.model.switches import TUFT_FIXES
from faultload.suite.profiles import get_profile

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
CI = get_profile("ci")

PROBE = """
import json
from pathlib import Path


def pytest_collection_finish(session):
    from faultload.suite import plugin

    from hypothesis import settings

    state = plugin.session(session.config)
    suite = state.runner()
    hypothesis = {item.name: item.obj._hypothesis_internal_use_settings for item in session.items
                  if hasattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings")}
    Path(session.config.invocation_params.dir, "probe.json").write_text(json.dumps({
        "profile": state.options.profile.name, "max_examples": state.options.profile.max_examples,
        "workspace": str(suite.workspace.root), "shrink_s": suite.shrink_s,
        "property_examples": {name: s.max_examples for name, s in hypothesis.items()},
        "property_verbosity": {name: s.verbosity.name for name, s in hypothesis.items()},
        "property_derandomize": {name: s.derandomize for name, s in hypothesis.items()},
        "hypothesis_profile": settings.get_current_profile_name(),
        "selected": [item.name for item in session.items],
    }))
"""


def collect(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str, *options: str) -> dict:
    """What the plugin resolved in a session collecting the properties ``how`` with ``options``."""
    pytester.makepyfile(probe=PROBE)
    pytester.syspathinsert()
    assert "faultload.suite.test_properties" not in sys.modules, "imported here: its options are stale"
    monkeypatch.delenv("FAULTLOAD_HOME", raising=False)
    monkeypatch.delenv("FAULTLOAD_PROFILE", raising=False)
    if how == "pyargs":
        where = ["--pyargs", "faultload.suite"]
    else:  # a user's own property file, as in the README
        shutil.copy(ROOT / "examples" / "test_big_results.py", pytester.path / "test_big_results.py")
        where = ["test_big_results.py"]
    result = pytester.runpytest_inprocess(
        "-p", "probe", "-p", "no:cacheprovider", "--collect-only", "-q", *where, *options
    )
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    return json.loads((pytester.path / "probe.json").read_text())


HOW = ["pyargs", "user-file"]


@pytest.mark.parametrize("how", HOW)
def test_examples_alone(pytester, monkeypatch, how: str) -> None:
    probe = collect(pytester, monkeypatch, how, "--faultload-examples", "3")
    assert (probe["profile"], probe["max_examples"]) == ("ci", 3)
    if how == "pyargs":  # the suite's properties draw that many (times their weight)
        assert probe["property_examples"]["test_health"] == 3
        assert probe["property_examples"]["test_all_invariants"] == 6  # weight 2: its trials are short
    else:  # a user's own @settings are theirs
        assert probe["property_examples"] == {"test_big_results_keep_fds_bounded": 5}


@pytest.mark.parametrize("how", HOW)
def test_workdir_alone(pytester, monkeypatch, how: str) -> None:
    workdir = pytester.path / "my-faultload"
    probe = collect(pytester, monkeypatch, how, "--faultload-workdir", str(workdir))
    assert probe["workspace"] == str(workdir.resolve())
    assert probe["max_examples"] == CI.max_examples and probe["shrink_s"] == CI.shrink_s


@pytest.mark.parametrize("how", HOW)
def test_shrink_s_alone(pytester, monkeypatch, how: str) -> None:
    probe = collect(pytester, monkeypatch, how, "--faultload-shrink-s", "7.5")
    assert probe["shrink_s"] == 7.5
    assert probe["max_examples"] == CI.max_examples


def test_without_options_the_ci_profile_and_the_default_workdir(pytester, monkeypatch) -> None:
    probe = collect(pytester, monkeypatch, "pyargs")
    assert (probe["profile"], probe["max_examples"], probe["shrink_s"]) == ("ci", CI.max_examples, CI.shrink_s)
    assert probe["property_examples"]["test_health"] == CI.max_examples
    assert probe["workspace"] == str((pytester.path / ".faultload").resolve())


def run(pytester: pytest.Pytester, how: str, *options: str):
    """(pytest's result, the probe) of a collect-only session like :func:`collect`'s, any exit code."""
    pytester.makepyfile(probe=PROBE)
    pytester.syspathinsert()
    if how == "pyargs":
        where = ["--pyargs", "faultload.suite"]
    else:
        shutil.copy(ROOT / "examples" / "test_big_results.py", pytester.path / "test_big_results.py")
        where = ["test_big_results.py"]
    result = pytester.runpytest_inprocess(
        "-p", "probe", "-p", "no:cacheprovider", "--collect-only", "-q", *where, *options
    )
    probe = pytester.path / "probe.json"
    return result, json.loads(probe.read_text()) if probe.exists() else None


@pytest.fixture
def hypothesis_profile_kept():
    """Hypothesis's loaded profile as it was before the test: its own plugin loads --hypothesis-profile
    process-wide and leaves it loaded when an in-process session ends."""
    from hypothesis import settings

    name = settings.get_current_profile_name()
    yield
    settings.load_profile(name)


MINE = """
from hypothesis import Verbosity, settings

settings.register_profile("mine", verbosity=Verbosity.verbose, max_examples=2)
"""


def test_the_suite_profile_is_a_loaded_hypothesis_profile_restored_at_the_end(pytester, monkeypatch) -> None:
    from hypothesis import settings

    monkeypatch.delenv("FAULTLOAD_PROFILE", raising=False)
    before = settings.get_current_profile_name()
    assert before in ("default", "ci")  # Hypothesis loads its "ci" itself where it sees CI=... (CI did)
    _, probe = run(pytester, "pyargs")
    assert probe["hypothesis_profile"] == "faultload-ci"
    assert settings.get_current_profile_name() == before  # the session loaded it back
    assert settings.get_profile("faultload-ci").derandomize and settings.get_profile("faultload-ci").deadline is None


@pytest.mark.parametrize("how", HOW)
def test_a_hypothesis_profile_of_yours_composes_with_the_suites(
    pytester, monkeypatch, how: str, hypothesis_profile_kept
) -> None:
    """--hypothesis-profile stays loaded; the suite's properties keep their examples and seed and take
    your verbosity; your own @settings keep theirs."""
    monkeypatch.delenv("FAULTLOAD_PROFILE", raising=False)
    pytester.makeconftest(MINE)
    result, probe = run(pytester, how, "--hypothesis-profile", "mine")
    assert result.ret == 0, result.stdout.str()
    assert probe["hypothesis_profile"] == "mine"
    name = "test_health" if how == "pyargs" else "test_big_results_keep_fds_bounded"
    assert probe["property_verbosity"][name] == "verbose"
    assert probe["property_derandomize"][name] is True
    assert probe["property_examples"][name] == (CI.max_examples if how == "pyargs" else 5)


@pytest.mark.parametrize("how", HOW)
def test_the_faultload_marker_selects_the_properties_under_strict_markers(pytester, monkeypatch, how: str) -> None:
    monkeypatch.delenv("FAULTLOAD_PROFILE", raising=False)
    result, probe = run(pytester, how, "--strict-markers", "-m", "faultload")
    assert result.ret == 0, result.stdout.str()
    assert len(probe["selected"]) == (
        9 if how == "pyargs" else 1
    )  # 9: the comparative and training ones too (skipped at run on ci)
    result, _ = run(pytester, how, "--strict-markers", "-m", "not faultload")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout.str()


@pytest.mark.parametrize("loaded", ["default", "ci"])
def test_hypothesis_own_profiles_leave_the_suites_loaded(
    pytester, monkeypatch, hypothesis_profile_kept, loaded: str
) -> None:
    """Hypothesis loads its ``ci`` profile itself under CI=true; that is not a profile of yours (CI failed
    on this: the suite kept Hypothesis's ``ci`` and its examples, not ``faultload-nightly``)."""
    from hypothesis import settings

    monkeypatch.setenv("FAULTLOAD_PROFILE", "nightly")
    settings.load_profile(loaded)
    _, probe = run(pytester, "pyargs")
    assert probe["hypothesis_profile"] == "faultload-nightly"
    assert settings.get_current_profile_name() == loaded


def test_faultload_profile_from_the_environment_read_at_configure(pytester, monkeypatch) -> None:
    monkeypatch.setenv("FAULTLOAD_PROFILE", "nightly")
    monkeypatch.setenv("FAULTLOAD_HOME", str(pytester.path / "home"))
    _, probe = run(pytester, "pyargs")
    assert (probe["profile"], probe["hypothesis_profile"]) == ("nightly", "faultload-nightly")
    assert probe["workspace"] == str((pytester.path / "home").resolve())


@pytest.fixture
def this_session(request: pytest.FixtureRequest):
    """This (outer) session's faultload state, made for the test and taken down after it."""
    from faultload.suite import plugin

    made = plugin.session(request.config)
    yield made
    made.close()
    del request.config.stash[plugin._SESSION]


def test_two_sessions_in_one_process_share_no_state(pytester, monkeypatch, request, this_session) -> None:
    """A session run inside this one (pytester, in process) has its own options and runner; ours is untouched."""
    from faultload.suite import plugin

    monkeypatch.delenv("FAULTLOAD_PROFILE", raising=False)
    runner = this_session.runner()
    _, probe = run(pytester, "pyargs", "--faultload-examples", "3", "--faultload-workdir", str(pytester.path / "in"))
    assert probe["max_examples"] == 3 and probe["workspace"] == str((pytester.path / "in").resolve())
    assert plugin.session(request.config) is this_session
    assert this_session.runner() is runner and this_session.options.profile.max_examples != 3
    assert runner.workspace.root != (pytester.path / "in").resolve()


def test_the_plugin_imports_no_machinery() -> None:
    """Every pytest run in the environment loads the plugin: it must not pull in Hypothesis or the runner."""
    import subprocess

    code = (
        "import sys, faultload.suite.plugin; "
        "print(sorted(m for m in sys.modules if m.startswith(('hypothesis', 'faultload.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # defaults, the switch names, default target and server families its help lists (plain values), the check of an
    # output option's folder (host.workspace), the exit codes (cli.exits, with the replay outcomes it maps) and the
    # harness's own error type it tells from a violation (suite.errors), how many lanes the machine holds and the
    # machine's turns (host.lanes, host.admission, suite.lanes): stdlib only
    assert out.strip() == (
        "['faultload.cli', 'faultload.cli.exits', 'faultload.host', 'faultload.host.admission', "
        "'faultload.host.lanes', 'faultload.host.signals', 'faultload.host.workspace', "
        "'faultload.model', 'faultload.model.family', 'faultload.model.switches', "
        "'faultload.model.target', 'faultload.store', 'faultload.store.outcomes', 'faultload.suite', "
        "'faultload.suite.defaults', 'faultload.suite.errors', 'faultload.suite.lanes', 'faultload.suite.options', "
        "'faultload.suite.plugin']"
    )


@pytest.mark.parametrize(
    "options, says",
    [
        (
            ("--faultload-target", "tuft==0.2.2", "--faultload-fix", "plain-tracebacks"),
            f"tuft==0.2.2 has no fix switch 'plain-tracebacks' (fix switches it has: {', '.join(TUFT_FIXES)})",
        ),
        (("--faultload-target", "nope"), "target 'nope': expected skyrl==X.Y.Z"),
    ],
)
def test_a_target_or_a_switch_its_family_lacks_is_a_usage_error_before_collection(
    pytester, monkeypatch, options, says: str
) -> None:
    result, probe = run(pytester, "pyargs", *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and probe is None
    assert any(says in line for line in result.errlines), result.errlines


@pytest.mark.parametrize("given", ["0", "two", "-3"])
def test_a_lane_count_that_is_not_one_is_a_usage_error(pytester, given: str) -> None:
    result, probe = run(pytester, "pyargs", "--faultload-lanes", given)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and probe is None
    assert any(f"--faultload-lanes: '{given}' is neither a count" in line for line in result.errlines), result.errlines
