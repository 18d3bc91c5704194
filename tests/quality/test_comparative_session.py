"""Quality tier: the suite's own comparative property (``--faultload-baseline``) through the plugin, on a
test double whose cost is known in advance.

A generated conftest overrides ``faultload_executor`` with the test double
:class:`tests.quality.compare_fakes.CostlierSwitch` (no server starts; a build with
``rich-access-log`` costs 1.5x the CPU per request). Each session is an
in-process pytest run (pytester) of ``--pyargs faultload.suite -k comparative``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultload.model.switches import REGRESSIONS
from faultload.suite import comparative

pytest_plugins = ["pytester"]

CONFTEST = """
import pytest

from tests.quality.compare_fakes import CostlierSwitch


@pytest.fixture(scope="session")
def faultload_executor():
    return CostlierSwitch(unmeasured={unmeasured})
"""


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *options: str, unmeasured: bool = False):
    """(pytest's result, the summary JSON) of a session of the suite's comparative property."""
    monkeypatch.delenv("FAULTLOAD_PROFILE", raising=False)
    monkeypatch.delenv("FAULTLOAD_HOME", raising=False)
    pytester.makeconftest(CONFTEST.format(unmeasured=unmeasured))
    summary = pytester.path / "summary.json"
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--pyargs",
        "faultload.suite",
        "-k",
        "comparative",
        "--faultload-workdir",
        str(pytester.path / "fl"),
        "--faultload-summary-json",
        str(summary),
        "-rs",
        *options,
    )
    return result, json.loads(summary.read_text()) if summary.exists() else None


def test_without_a_baseline_the_property_is_skipped_with_its_reason(pytester, monkeypatch) -> None:
    result, summary = run(pytester, monkeypatch)
    result.assert_outcomes(skipped=1)
    assert "no --faultload-baseline BUILD: nothing to compare the target with" in result.stdout.str()
    assert summary["baseline"] is None


def test_a_bad_baseline_is_one_usage_error_line(pytester, monkeypatch) -> None:
    result, summary = run(pytester, monkeypatch, "--faultload-baseline", "skyrl==0.4.0+regress=nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [
        "ERROR: --faultload-baseline 'skyrl==0.4.0+regress=nope': unknown regression 'nope'; "
        f"known: {', '.join(sorted(REGRESSIONS))}"
    ]
    assert summary is None


def test_the_same_build_passes(pytester, monkeypatch) -> None:
    result, summary = run(pytester, monkeypatch, "--faultload-baseline", "skyrl==0.4.0")
    result.assert_outcomes(passed=1)
    (prop,) = summary["properties"]
    assert summary["baseline"] == "skyrl==0.4.0" and prop["judged_trials"] > 0 and prop["error"] is None


def test_an_unmeasured_metric_fails_the_property_as_not_judged(pytester, monkeypatch) -> None:
    result, _ = run(pytester, monkeypatch, "--faultload-baseline", "skyrl==0.4.0", unmeasured=True)
    result.assert_outcomes(failed=1)
    assert "left no_worse_than_baseline unknown" in result.stdout.str()


def test_a_costlier_target_fails_shrinks_to_the_floor_and_writes_a_repro_naming_both(pytester, monkeypatch) -> None:
    result, summary = run(
        pytester, monkeypatch, "--faultload-baseline", "skyrl==0.4.0", "--faultload-regress", "rich-access-log"
    )
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "no_worse_than_baseline violated" in out and "worse: server_cpu_ms_per_request x1.5" in out
    (prop,) = summary["properties"]
    assert prop["violated"] == ["no_worse_than_baseline"] and prop["repro_requests"] == comparative.MIN_REQUESTS
    repro = json.loads(Path(prop["repro_path"]).read_text())
    assert (repro["baseline"], repro["candidate"]) == ("skyrl==0.4.0", "skyrl==0.4.0+regress=rich-access-log")
    assert repro["config"]["faults"]["faults"] == [] and repro["compare"]["repeats"] == 3
    assert f"replay: faultload replay {prop['repro_path']}" in out
