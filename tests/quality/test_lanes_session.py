"""Quality tier: a session of lanes (pytest-xdist workers) through the faultload plugin, on an executor whose
failure is known.

The session runs in a pytest subprocess (pytester) with ``-n 2``: each lane is its own process with its own
runner (the test double :class:`tests.quality.fakes.KnownFailure`, from a generated conftest: no server
starts), and the controller merges what they report. Asserts the merged summary against what the lanes' executors
ran, the lanes' lines in the terminal, the turns they took of the machine, and the exit codes: 1 for the
server's failure, 3 when the only bad outcomes are the harness's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultload.cli.exits import EXIT_HARNESS
from tests.quality.test_plugin_session import CONFTEST, HARNESS_CONFTEST, PROPERTIES, N

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent.parent


def run_lanes(pytester: pytest.Pytester, conftest: str, *args: str):
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_generated=PROPERTIES)
    summary = pytester.path / "summary.json"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "--faultload-workdir",
        str(pytester.path / "fl"),
        "--faultload-summary-json",
        str(summary),
        *args,
    )
    return result, (json.loads(summary.read_text()) if summary.exists() else None)


@pytest.fixture
def repo_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lanes import ``tests.quality.fakes`` from this repository, as the in-process sessions do."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))


def test_the_controller_merges_its_lanes_into_one_summary(pytester, repo_on_path) -> None:
    result, summary = run_lanes(pytester, CONFTEST.format(n=N, unknown=False))
    result.assert_outcomes(failed=3)
    assert result.ret == 1
    props = {p["name"]: p for p in summary["properties"]}
    assert sorted(props) == ["test_cpu", "test_integrity", "test_known_failure"]
    assert all(p["outcome"] == "failed" and p["violated"] == ["no_lost_results"] for p in props.values())
    assert Path(props["test_known_failure"]["repro_path"]).exists()
    ran = [json.loads(line) for line in (pytester.path / "ran.jsonl").read_text().splitlines()]  # both lanes' runs
    assert summary["trials"] == len(ran) == sum(p["trials"] for p in props.values()) > 0
    lanes = summary["lanes"]
    assert lanes["count"] == 2 and not lanes["lost"]
    assert sorted(n for by in lanes["by_lane"].values() for n in by["properties"]) == sorted(
        p["nodeid"] for p in props.values()
    )
    out = result.stdout.str()
    assert "2 lane(s), as pytest-xdist's -n set" in out
    assert "[gw0] " in out or "[gw1] " in out
    # every trial took its turn of the machine: the workspace's slots are there, none held now
    slots = sorted(p.name for p in (pytester.path / "fl" / "admission").glob("slot-*.lock"))
    assert slots and all((pytester.path / "fl" / "admission" / name).exists() for name in slots)


def test_a_session_of_lanes_whose_only_errors_are_the_harness_exits_3(pytester, repo_on_path) -> None:
    result, summary = run_lanes(pytester, HARNESS_CONFTEST.format(n=N, error="a load worker crashed (exit -9)"))
    result.assert_outcomes(errors=3)
    assert result.ret == EXIT_HARNESS
    assert all(p["outcome"] == "error" for p in summary["properties"])


ALWAYS_FAILS = """
import pytest

from faultload.checker.inputs import Verdict
from faultload.suite.executor import TrialOutcome


class AlwaysFails:
    \"\"\"TEST DOUBLE executor: every trial violates no_lost_results; nothing starts.\"\"\"

    def run(self, config):
        verdict = Verdict(name="no_lost_results", ok=False, figure=1, budget=0, head="test double: lost one")
        figures = {"no_lost_results": {"ok": False, "figure": 1, "budget": 0}}
        return TrialOutcome([verdict], figures, config.shape.requests, 0.0)

    def close(self):
        pass

    def describe(self):
        return "test double: always fails"


@pytest.fixture(scope="session")
def faultload_executor():
    return AlwaysFails()
"""


def test_under_x_the_first_failure_stops_the_lanes_and_the_session_exits_1(pytester, repo_on_path) -> None:
    """pytest-xdist ends a -x session as an interrupt (its exit 2); the suite's is the server's failure, 1."""
    pytester.makeconftest(ALWAYS_FAILS)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--pyargs",
        "faultload.suite",
        "-k",
        "integrity or health",
        "-x",
        "--faultload-lanes",
        "2",
        "--faultload-workdir",
        str(pytester.path / "fl"),
    )
    assert result.ret == 1, result.stdout.str()[-3000:]
    assert "no_lost_results violated" in result.stdout.str()
    assert not list((pytester.path / "fl" / "admission").glob("stop-*"))  # the mark goes with the session
