"""Quality tier: a whole pytest session through the faultload plugin, on an executor whose failure is known.

A generated conftest overrides the plugin's ``faultload_executor`` fixture with
the test double :class:`tests.quality.fakes.KnownFailure` (no server starts);
the generated properties are written as a user writes them (``faultload_suite``
and ``check``). The session is an in-process pytest run (pytester); the plugin keeps its
state on that session's own config, so it shares none with this one. Asserts what
the plugin reports: the failing property's repro (exactly 40 requests and the
one fault), the property that judged nothing failing as not judged, the
summary JSON's counts against what the executor ran, and ``faultload
matrix``'s verdict on a session that judged nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tests.quality.fakes  # noqa: F401 - loaded here first: each in-process session drops the modules it imported, and numpy's cannot load twice
from faultload.matrix.run import judge_row, select_rows

pytest_plugins = ["pytester"]

N = 40

CONFTEST = """
from pathlib import Path

import pytest

from tests.quality.fakes import KnownFailure


@pytest.fixture(scope="session")
def faultload_executor():
    return KnownFailure(min_requests={n}, link="backend", kind="down", unknown={unknown},
                        unknown_for=("bounded_cpu",), record_to=Path(__file__).parent / "ran.jsonl")
"""

PROPERTIES = """
from hypothesis import HealthCheck, Phase, given, settings

from faultload.model.faults import Fault
from faultload.suite.properties import Property
from tests.quality.fakes import TIME_SCALE, configs_meeting

FAULT = Fault("backend", "down", start_s=0.0, duration_s=5.0 * TIME_SCALE)
# The suite's phases (test_properties._settings): no "explain" phase, which re-runs the failure traced.
SETTINGS = settings(max_examples=40, derandomize=True, database=None, deadline=None,
                    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False)


@SETTINGS
@given(config=configs_meeting(FAULT))
def test_known_failure(faultload_suite, config):
    faultload_suite.check(Property("known_failure", ("no_lost_results",), ("no_lost_results",)), config)


@SETTINGS
@given(config=configs_meeting(FAULT))
def test_cpu(faultload_suite, config):
    faultload_suite.check(Property("cpu", ("bounded_cpu",), ("bounded_cpu",)), config)


@SETTINGS
@given(config=configs_meeting(FAULT))
def test_integrity(faultload_suite, config):
    faultload_suite.check(Property("integrity", ("result_integrity",), ()), config)
"""


def run_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, unknown: bool):
    """(pytest's result, the summary JSON, the configs the executor ran as JSON lines)."""
    pytester.makeconftest(CONFTEST.format(n=N, unknown=unknown))
    pytester.makepyfile(test_generated=PROPERTIES)
    workdir, summary_path = pytester.path / "fl", pytester.path / "summary.json"
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--faultload-workdir", str(workdir), "--faultload-summary-json", str(summary_path)
    )
    ran_path = pytester.path / "ran.jsonl"
    ran = [json.loads(line) for line in ran_path.read_text().splitlines()] if ran_path.exists() else []
    return result, json.loads(summary_path.read_text()), ran, workdir


def by_name(summary: dict) -> dict[str, dict]:
    return {p["name"]: p for p in summary["properties"]}


def test_a_session_reports_the_known_failure_and_what_it_judged(pytester, monkeypatch) -> None:
    result, summary, ran, workdir = run_session(pytester, monkeypatch, unknown=False)
    # a violation seen fails whichever property's trial saw it: no_lost_results fails all three
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert "no_lost_results violated (seen by this trial, not asserted by its property)" in out
    props = by_name(summary)
    known, cpu, integrity = props["test_known_failure"], props["test_cpu"], props["test_integrity"]

    assert known["outcome"] == "failed" and known["violated"] == ["no_lost_results"]
    assert known["repro_requests"] == N
    repro_path = Path(known["repro_path"])
    assert repro_path.parent == workdir.resolve() / "repros"
    repro = json.loads(repro_path.read_text())
    assert repro["requests"] == N and repro["config"]["shape"]["requests"] == N
    assert [(f["link"], f["kind"]) for f in repro["config"]["faults"]["faults"]] == [("backend", "down")]
    assert f"replay: faultload replay {repro_path}" in out

    assert cpu["outcome"] == "failed" and cpu["violated"] == ["no_lost_results"] and cpu["judged_trials"] == 0
    assert integrity["outcome"] == "failed" and integrity["violated"] == ["no_lost_results"]

    # The counts are what the executor ran: each config once in the session (the cache is shared).
    assert len({r["key"] for r in ran}) == len(ran) == summary["trials"] > 0
    assert sum(p["trials"] for p in props.values()) == summary["trials"]
    for p in props.values():
        (tally,) = p["invariants"].values()
        # Each distinct config a property met is tallied once: those it ran, and some it found in the cache.
        assert p["trials"] <= tally["judged"] + tally["unknown"] <= p["trials"] + p["cached"]
        assert tally["skipped"] == p["not_run"] == 0 and p["judged_trials"] == tally["judged"]
    assert (
        known["invariants"]["no_lost_results"]["unknown"] == integrity["invariants"]["result_integrity"]["unknown"] == 0
    )
    assert cpu["invariants"]["bounded_cpu"]["judged"] == 0 and cpu["invariants"]["bounded_cpu"]["unknown"] > 0
    assert summary["judged_trials"] == known["judged_trials"] + integrity["judged_trials"]
    assert "invariants (judged / unknown / skipped)" in out


def test_a_session_that_judged_nothing_fails_every_property_and_its_row_is_error(pytester, monkeypatch) -> None:
    result, summary, ran, _ = run_session(pytester, monkeypatch, unknown=True)
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    for invariant in ("no_lost_results", "bounded_cpu", "result_integrity"):
        assert f"not judged: no example judged any of {invariant}" in out
    assert summary["judged_trials"] == 0 and summary["trials"] == len(ran) > 0
    assert all(p["outcome"] == "failed" and p["error"].startswith("not judged") for p in summary["properties"])
    row = judge_row(select_rows(["clean"])[0], summary, result.ret, 1.0)
    assert row.result == "error" and "not judged" in row.error


def test_an_executor_given_after_the_runner_was_made_is_an_error_not_the_real_stack(pytester, monkeypatch) -> None:
    """Never a silent fall-back to the real stack: a runner made before the fixture ran cannot take its executor."""
    pytester.makeconftest(
        CONFTEST.format(n=N, unknown=False)
        + """

def pytest_collection_finish(session):
    from faultload.suite import plugin

    plugin.session(session.config).runner()  # made here, with the real stack, before any fixture
"""
    )
    pytester.makepyfile(test_generated=PROPERTIES)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--faultload-workdir", str(pytester.path / "fl"))
    result.assert_outcomes(errors=3)
    assert "the session's runner was made before faultload_executor gave its executor" in result.stdout.str()
    assert not (pytester.path / "ran.jsonl").exists()


HARNESS_CONFTEST = """
import pytest

from tests.quality.fakes import KnownFailure


@pytest.fixture(scope="session")
def faultload_executor():
    return KnownFailure(min_requests={n}, link="backend", kind="down", harness_error="{error}")
"""


def test_a_harness_error_is_a_pytest_error_and_the_harness_exit_code_not_a_failure(pytester) -> None:
    """A load worker that crashed is the rig's failure: every property an error (pytest's E, JUnit's <error>),
    none failed, and the session exits 3, so CI can retry it and not mistake it for the server's."""
    from faultload.cli.exits import EXIT_HARNESS

    pytester.makeconftest(HARNESS_CONFTEST.format(n=N, error="a load worker crashed (exit -9)"))
    pytester.makepyfile(test_generated=PROPERTIES)
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--faultload-workdir", str(pytester.path / "fl"), f"--junitxml={junit}"
    )
    result.assert_outcomes(errors=3)
    assert result.ret == EXIT_HARNESS
    xml = junit.read_text()
    assert xml.count("<error ") == 3 and "<failure " not in xml and "a load worker crashed" in xml


def test_a_session_no_sdk_can_read_is_the_servers_failure_not_a_harness_error(pytester, tmp_path) -> None:
    """A server that answers create_sampling_session with what no SDK reads fails before any load: every property
    fails (JUnit's <failure>), the session exits 1, and the server was asked once, not once per example."""
    ran = tmp_path / "ran.jsonl"
    pytester.makeconftest(
        HARNESS_CONFTEST.replace('harness_error="{error}"', 'refused="{error}", record_to=Path({ran!r})')
        .replace("import pytest", "from pathlib import Path\n\nimport pytest")
        .format(n=N, error="the server is at fault before any load: no sampling_session_id", ran=str(ran))
    )
    pytester.makepyfile(test_generated=PROPERTIES)
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--faultload-workdir", str(pytester.path / "fl"), f"--junitxml={junit}"
    )
    result.assert_outcomes(failed=3)
    assert result.ret == 1
    xml = junit.read_text()
    assert xml.count("<failure ") == 3 and "<error " not in xml and "no sampling_session_id" in xml
    assert len(ran.read_text().splitlines()) == 1
    assert result.stdout.str().count("FAILED the server is at fault before any load") == 3


def test_a_violation_beside_a_harness_error_is_still_a_failure(pytester) -> None:
    """One property failed on the server while another met a harness error: exit 1, the server's."""
    pytester.makeconftest(HARNESS_CONFTEST.format(n=N, error="boom"))
    pytester.makepyfile(
        test_generated=PROPERTIES
        + """

def test_plain_failure():
    assert False, "a test of the user's own"
"""
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--faultload-workdir", str(pytester.path / "fl"))
    result.assert_outcomes(errors=3, failed=1)
    assert result.ret == 1
