"""Unit tests of the suite's comparative property (``--faultload-baseline``): the verdict, the two-build
executor, the runner's wiring (cache, shrinking floor, unknown), the repro and its replay.

Trials come from the test double :class:`tests.quality.compare_fakes.CostlierSwitch`
(no server starts: a build with ``rich-access-log`` costs 1.5x the CPU per request);
``faultload replay``'s comparison runner is replaced by a test double too.
"""

from __future__ import annotations

import dataclasses
import io
import json

import pytest

from faultload.compare import replay as replay_mod
from faultload.compare.judge import CompareSettings
from faultload.compare.runner import SideTrial, abba
from faultload.host.workspace import Workspace
from faultload.model.build import parse_build
from faultload.model.router import RouterConfig
from faultload.model.target import parse_target
from faultload.store import repro as repro_mod
from faultload.store.outcomes import ReplayStatus
from faultload.suite import comparative
from faultload.suite.executor import SuiteError, TrialOutcome
from faultload.suite.profiles import get_profile
from faultload.suite.properties import Property
from faultload.suite.reducer import with_requests
from faultload.suite.session import SuiteOptions
from faultload.targets.install import STAMP
from tests.quality.compare_fakes import CostlierSwitch, fake_report
from tests.quality.fakes import make_runner, trial

COMPARATIVE = Property("comparative", (comparative.INVARIANT,), (), limits=comparative.LIMITS, comparative=True)
BASELINE = parse_build("skyrl==0.4.0")
NODE = "tests/unit/test_suite_comparative.py::test_p"


def candidate(requests: int = 200, regress: tuple[str, ...] = ("rich-access-log",)):
    return dataclasses.replace(trial(requests), regress=regress)


def runner_on(tmp_path, fake, **profile):
    runner = make_runner(tmp_path, fake, baseline=BASELINE, compare_settings=CompareSettings())
    runner.begin(NODE)
    return runner


# --------------------------------------------------------------------------- the verdict


def test_a_costlier_candidate_is_violated_naming_the_metric_and_its_interval() -> None:
    fake = CostlierSwitch()
    executor = comparative.ComparingExecutor(
        BASELINE, {"baseline": fake, "candidate": fake}, 3, CompareSettings(), log=lambda m: None
    )
    outcome = executor.run(candidate())
    (verdict,) = outcome.verdicts
    assert verdict.name == "no_worse_than_baseline" and verdict.ok is False
    assert outcome.comparison["worse"] == ["server_cpu_ms_per_request"]
    assert "server_cpu_ms_per_request x1.5" in verdict.detail and "threshold <= 1.15" in verdict.detail
    assert verdict.figure == pytest.approx(1.5 / 1.15, rel=0.02) and verdict.budget == 1.0


def test_the_sides_run_abba_within_the_example_each_on_its_own_build() -> None:
    fake = CostlierSwitch()
    executor = comparative.ComparingExecutor(
        BASELINE, {"baseline": fake, "candidate": fake}, 3, CompareSettings(), log=lambda m: None
    )
    outcome = executor.run(candidate())
    one_round = [(), ("rich-access-log",), ("rich-access-log",), (), (), ("rich-access-log",)]
    assert [c.regress for c in fake.ran] == one_round * 2  # worse after the first: confirmed by a second
    assert outcome.comparison["repeats"] == 6 and outcome.error is None
    assert [t["order"] for t in outcome.comparison["trials"]] == list(range(12))


def test_a_flagged_example_runs_once_more_and_is_judged_on_all_its_trials() -> None:
    """A build no costlier whose first round came out worse by the draw of its trials (the test double makes
    the candidate's first 3 trials 1.5x, later ones equal) is judged on the 6 a side: no metric worse."""
    fake = CostlierSwitch(costlier_trials=3)
    logged: list[str] = []
    outcome = comparative.ComparingExecutor(
        BASELINE, {"baseline": fake, "candidate": fake}, 3, CompareSettings(), log=logged.append
    ).run(candidate())
    assert len(fake.ran) == 12 and outcome.comparison["repeats"] == 6
    assert any("running the example again to confirm" in line for line in logged)
    assert outcome.verdicts[0].ok is True


def test_an_example_no_metric_flagged_runs_one_round() -> None:
    fake = CostlierSwitch(factor=1.0)
    comparative.ComparingExecutor(
        BASELINE, {"baseline": fake, "candidate": fake}, 3, CompareSettings(), log=lambda m: None
    ).run(candidate())
    assert len(fake.ran) == 6


def test_the_same_build_is_no_worse_and_an_unmeasured_metric_is_unknown() -> None:
    same = comparative.ComparingExecutor(
        BASELINE,
        {"baseline": CostlierSwitch(), "candidate": CostlierSwitch()},
        2,
        CompareSettings(),
        log=lambda m: None,
    ).run(candidate(regress=()))
    assert same.verdicts[0].ok is True and "no metric worse" in same.verdicts[0].detail
    fake = CostlierSwitch(unmeasured=True)
    blind = comparative.ComparingExecutor(
        BASELINE, {"baseline": fake, "candidate": fake}, 2, CompareSettings(), log=lambda m: None
    ).run(candidate(regress=()))
    assert blind.verdicts[0].ok is None and "healthz_p99_s" in blind.verdicts[0].detail


def test_an_invariant_a_trial_violated_is_a_verdict_of_the_example_naming_the_build_and_trial() -> None:
    """Both builds' costs alike, but every candidate trial violates polls_held (the test double says so)."""
    fake = CostlierSwitch(factor=1.0, violates="polls_held")
    outcome = comparative.ComparingExecutor(
        BASELINE, {"baseline": fake, "candidate": fake}, 2, CompareSettings(), log=lambda m: None
    ).run(candidate())
    compared, held = outcome.verdicts
    assert compared.name == "no_worse_than_baseline" and compared.ok is True
    assert held.name == "polls_held" and held.ok is False and held.figure == 128 and held.budget == 0
    assert held.detail.startswith(
        "in 2 of the comparison's trials (skyrl==0.4.0+regress=rich-access-log trial 2, "
        "skyrl==0.4.0+regress=rich-access-log trial 3)"
    )
    assert [t["violated"] for t in outcome.comparison["trials"]] == [[], ["polls_held"], ["polls_held"], []]


def test_the_runner_fails_the_comparative_property_on_a_trials_violation(tmp_path) -> None:
    runner = runner_on(tmp_path, CostlierSwitch(factor=1.0, violates="polls_held"))
    with pytest.raises(
        AssertionError, match=r"polls_held violated \(seen by this trial, not asserted by its property\)"
    ):
        runner.check(COMPARATIVE, candidate(200))
    assert runner.not_judged(NODE) is None  # the comparison itself was judged (no metric worse)


def test_replay_reproduces_a_trials_violation_though_no_metric_is_worse(tmp_path, monkeypatch) -> None:
    runner = runner_on(tmp_path, CostlierSwitch(factor=1.0, violates="polls_held"))
    with pytest.raises(AssertionError):
        runner.check(COMPARATIVE, candidate(comparative.MIN_REQUESTS))
    runner.end()
    path = runner.write_repro(runner.states[NODE])
    calls: list = []

    def violating(config, builds, repeats, workspace, budgets, log, admission=None):
        """TEST DOUBLE of run_comparison: costs alike, the candidate's trials violate polls_held."""
        trials = _fake_comparison(1.0, calls)(config, builds, repeats, workspace, budgets, log)
        for t in trials:
            t.report["invariants"] = [{"name": "polls_held", "ok": t.side == "baseline"}]
        return trials

    monkeypatch.setattr(replay_mod, "run_comparison", violating)
    out = io.StringIO()
    assert repro_mod.replay(path, Workspace(tmp_path), out=out) == ReplayStatus.REPRODUCED
    assert "originally worse: nothing, violated in a trial: polls_held" in out.getvalue()
    assert "reproduced: violated in a trial: polls_held" in out.getvalue()


def test_a_side_without_a_report_is_a_harness_error_not_a_verdict() -> None:
    class NoReport(CostlierSwitch):  # TEST DOUBLE: an executor that does not keep reports
        def run(self, config):
            return TrialOutcome([], {}, config.shape.requests, 0.0)

    outcome = comparative.ComparingExecutor(
        BASELINE, {"baseline": NoReport(), "candidate": NoReport()}, 1, CompareSettings(), log=lambda m: None
    ).run(candidate())
    assert outcome.verdicts == [] and "baseline skyrl==0.4.0: the executor kept no trial report" in outcome.error


# --------------------------------------------------------------------------- the runner's wiring


def test_the_runner_fails_a_costlier_candidate_and_shrinks_no_lower_than_the_floor(tmp_path) -> None:
    fake = CostlierSwitch()
    runner = runner_on(tmp_path, fake)
    with pytest.raises(AssertionError, match="no_worse_than_baseline violated"):
        runner.check(COMPARATIVE, candidate(256))
    state = runner.current
    assert state.best[0].shape.requests == comparative.MIN_REQUESTS  # 256 -> 128; "1 request" is never tried
    assert min(c.shape.requests for c in fake.ran) == comparative.MIN_REQUESTS
    assert all(step["still_fails"] for step in state.reduce_log if "requests" in step["step"])


def test_a_comparison_is_cached_apart_from_a_plain_trial_of_the_same_config(tmp_path) -> None:
    fake = CostlierSwitch()
    runner = runner_on(tmp_path, fake)
    config = candidate(200, regress=())
    runner.check(COMPARATIVE, config)
    runner.check(COMPARATIVE, config)
    assert len(fake.ran) == 6  # one comparison of 3 + 3 trials; the second check was answered by the cache
    runner.check(Property("plain", ("bounded_cpu",), ()), config)
    assert len(fake.ran) == 7  # the plain trial is its own cache entry
    assert runner.summary_dict()["baseline"] == "skyrl==0.4.0"
    assert "; compared with skyrl==0.4.0: 1 comparisons of 3 + 3 trials" in runner.summary_lines()[0]


def test_an_unknown_comparison_fails_the_property_as_not_judged(tmp_path) -> None:
    runner = runner_on(tmp_path, CostlierSwitch(unmeasured=True))
    runner.check(COMPARATIVE, candidate(200, regress=()))  # no metric worse, /healthz p99 not measured
    reason = runner.not_judged(NODE)
    assert reason is not None and reason.startswith("not judged: 1 examples left no_worse_than_baseline unknown")


def test_without_a_baseline_the_comparative_property_is_a_suite_error(tmp_path) -> None:
    runner = make_runner(tmp_path, CostlierSwitch())
    runner.begin(NODE)
    with pytest.raises(Exception, match="needs a baseline build"):
        runner.check(COMPARATIVE, candidate())


def test_a_comparison_due_that_cannot_run_is_a_harness_error_saying_why(tmp_path) -> None:
    why = "not compared with its release skyrl==0.4.0: not installed (faultload setup --target skyrl==0.4.0)"
    runner = make_runner(tmp_path, CostlierSwitch(), baseline_missing=why)
    runner.begin(NODE)
    with pytest.raises(SuiteError, match="a comparison is due and cannot run: not compared with its release"):
        runner.check(COMPARATIVE, candidate())


def test_at_least_raises_a_small_draw_to_the_floor_and_keeps_a_large_one() -> None:
    assert comparative.at_least(trial(3)).shape.requests == comparative.MIN_REQUESTS
    assert comparative.at_least(trial(300)).shape.requests == 300
    comparative.at_least(with_requests(trial(3), 3)).validate()


@pytest.mark.parametrize(
    "router, held_s",
    [
        (RouterConfig(mode="immediate"), comparative.MIN_LOAD_S),  # 0.3-0.9 s on ci: sampled once or twice
        (RouterConfig(mode="latency", max_num_seqs=256, gen_seconds=0.05), comparative.MIN_LOAD_S),
        (RouterConfig(mode="latency", max_num_seqs=64, gen_seconds=4.0), comparative.MAX_LOAD_S),  # 16 s: cut
        (RouterConfig(mode="latency", max_num_seqs=64, gen_seconds=1.0), 4.0),  # inside the window: as drawn
    ],
)
def test_the_router_holds_a_comparative_load_long_enough_to_measure_and_no_longer(router, held_s) -> None:
    config = comparative.at_least(dataclasses.replace(trial(250), router=router))
    config.validate()
    assert config.router.mode == "latency" and comparative.fits(config)
    assert config.router.answer_bound_s(250) == pytest.approx(held_s, abs=0.01)
    assert comparative.MIN_LOAD_S <= config.router.answer_bound_s(250) <= comparative.MAX_LOAD_S
    assert comparative.at_least(config) == config  # a second pass changes nothing (Hypothesis's replays)


# --------------------------------------------------------------------------- the repro and its replay


def _failing_repro(tmp_path):
    runner = runner_on(tmp_path, CostlierSwitch())
    with pytest.raises(AssertionError):
        runner.check(COMPARATIVE, candidate(comparative.MIN_REQUESTS))
    runner.end()
    path = runner.write_repro(runner.states[NODE])
    return path, json.loads(path.read_text())


def test_the_repro_names_both_builds_the_repeats_and_the_thresholds(tmp_path) -> None:
    path, data = _failing_repro(tmp_path)
    assert data["repro_version"] == repro_mod.COMPARE_REPRO_VERSION
    assert (data["baseline"], data["candidate"]) == ("skyrl==0.4.0", "skyrl==0.4.0+regress=rich-access-log")
    assert data["compare"]["repeats"] == 3 and data["compare"]["result"]["worse"] == ["server_cpu_ms_per_request"]
    assert data["compare"]["settings"]["thresholds"]["server_cpu_ms_per_request"] == 1.15
    assert data["replay"] == f"faultload replay {path}"
    assert "server_cpu_ms_per_request" in open(data["compare_table"]).read()
    baseline, repeats, settings = replay_mod.compare_spec(path, data)
    assert (baseline, repeats, settings) == (BASELINE, 3, CompareSettings())


def _fake_comparison(factor: float, calls: list):
    """TEST DOUBLE of run_comparison: each side's reports as CostlierSwitch would give them, ABBA."""

    def run(config, builds, repeats, workspace, budgets, log, admission=None):
        calls.append((config, {side: b.text for side, b in builds.items()}, repeats))
        trials = []
        for i, side in enumerate(abba(repeats)):
            cost = factor if side == "candidate" else 1.0
            report = fake_report(config.shape.requests, 2e-3 * config.shape.requests * cost, 0.001 * i)
            trials.append(SideTrial(side, builds[side], i, report))
        return trials

    return run


@pytest.mark.parametrize(
    "factor, code, status",
    [(1.5, ReplayStatus.REPRODUCED, "reproduced"), (1.0, ReplayStatus.NOT_REPRODUCED, "not reproduced")],
)
def test_replay_runs_both_builds_again_and_exits_by_the_comparison(tmp_path, monkeypatch, factor, code, status) -> None:
    path, _ = _failing_repro(tmp_path)
    calls: list = []
    monkeypatch.setattr(replay_mod, "run_comparison", _fake_comparison(factor, calls))
    out = io.StringIO()
    json_out = tmp_path / "replayed.json"
    assert repro_mod.replay(path, Workspace(tmp_path), str(json_out), out=out) == code
    ((config, builds, repeats),) = calls
    assert builds == {"baseline": "skyrl==0.4.0", "candidate": "skyrl==0.4.0+regress=rich-access-log"}
    assert repeats == 3 and config.shape.requests == comparative.MIN_REQUESTS
    assert f"{status}:" in out.getvalue() and "| server_cpu_ms_per_request |" in out.getvalue()
    assert json.loads(json_out.read_text())["replay"]["status"] == status


def test_replay_with_a_target_changes_the_candidate_only(tmp_path, monkeypatch) -> None:
    path, _ = _failing_repro(tmp_path)
    calls: list = []
    monkeypatch.setattr(replay_mod, "run_comparison", _fake_comparison(1.0, calls))
    repro_mod.replay(path, Workspace(tmp_path), out=io.StringIO(), fixes=("plain-tracebacks",))
    assert calls[0][1] == {
        "baseline": "skyrl==0.4.0",
        "candidate": "skyrl==0.4.0+regress=rich-access-log+fix=plain-tracebacks",
    }


def test_a_plain_repro_still_loads_and_a_mislabelled_one_is_refused(tmp_path) -> None:
    path, data = _failing_repro(tmp_path)
    plain = {k: v for k, v in data.items() if k not in ("compare", "baseline", "candidate")}
    (tmp_path / "plain.json").write_text(json.dumps({**plain, "repro_version": 1}))
    repro_mod.load_repro(tmp_path / "plain.json")
    (tmp_path / "v2.json").write_text(json.dumps({**plain, "repro_version": 2}))
    with pytest.raises(ValueError, match="repro_version 2 needs a 'compare' block"):
        repro_mod.load_repro(tmp_path / "v2.json")
    (tmp_path / "bad.json").write_text(json.dumps({**data, "compare": {**data["compare"], "repeats": 0}}))
    with pytest.raises(ValueError, match="at least 1 trial per side"):
        replay_mod.compare_spec(tmp_path / "bad.json", json.loads((tmp_path / "bad.json").read_text()))


# --------------------------------------------------------------------------- the option


class FakeConfig:
    """TEST DOUBLE of ``pytest.Config``: only what SuiteOptions reads (``getoption``, ``rootpath``)."""

    def __init__(self, rootpath, **options) -> None:
        self.rootpath, self.options = rootpath, options

    def getoption(self, name: str):
        return self.options.get(name)


def test_the_baseline_option_parses_and_adds_the_comparisons_time_to_the_session(tmp_path) -> None:
    ci = get_profile("ci")
    opts = SuiteOptions(FakeConfig(tmp_path, faultload_baseline="skyrl==0.4.0+regress=rich-access-log"))
    assert opts.baseline == parse_build("skyrl==0.4.0+regress=rich-access-log")
    assert opts.compare_settings == CompareSettings()  # no [tool.faultload.compare] under tmp_path
    assert opts.profile.session_s == ci.session_s + ci.compare_examples * comparative.EXAMPLE_S
    given = SuiteOptions(FakeConfig(tmp_path, faultload_baseline="skyrl==0.4.0", faultload_session_s=60.0))
    assert given.profile.session_s == 60.0  # an explicit --faultload-session-s wins
    plain = SuiteOptions(FakeConfig(tmp_path))
    assert plain.baseline is None and plain.profile.session_s == ci.session_s


@pytest.mark.parametrize(
    "spec, message",
    [
        ("skyrl==9.9", "--faultload-baseline: target 'skyrl==9.9'"),
        ("skyrl==0.4.0+fix=nope", "--faultload-baseline 'skyrl==0.4.0+fix=nope': unknown fix 'nope'"),
    ],
)
def test_a_bad_baseline_is_a_usage_error_naming_the_option(tmp_path, spec, message) -> None:
    with pytest.raises(pytest.UsageError) as raised:
        SuiteOptions(FakeConfig(tmp_path, faultload_baseline=spec))
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def _checkout(tmp_path, version: str) -> str:
    path = tmp_path / "skyrl-checkout"
    path.mkdir()
    (path / "pyproject.toml").write_text(f'[project]\nname = "skyrl"\nversion = "{version}"\n')
    return f"skyrl@{path}"


def _installed(home, version: str) -> None:
    """What ``is_installed`` reads of a target venv (its stamp and python); no real install."""
    venv = home / "targets" / f"skyrl-{version}"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / STAMP).write_text("{}")


def test_a_checkout_on_ci_is_compared_with_its_installed_release_by_default(tmp_path) -> None:
    target = _checkout(tmp_path, "0.4.0.dev3")
    home = tmp_path / "home"
    missing = SuiteOptions(FakeConfig(tmp_path, faultload_target=target), environ={"FAULTLOAD_HOME": str(home)})
    assert missing.baseline is None and missing.baseline_missing == missing.baseline_note  # due: its property errs
    assert missing.baseline_note.startswith("not compared with its release skyrl==0.4.0: not installed")
    _installed(home, "0.4.0")
    opts = SuiteOptions(FakeConfig(tmp_path, faultload_target=target), environ={"FAULTLOAD_HOME": str(home)})
    assert opts.baseline == parse_build("skyrl==0.4.0") and "by default" in opts.baseline_note
    assert opts.profile.session_s > get_profile("ci").session_s  # the comparisons' time comes on top
    off = SuiteOptions(
        FakeConfig(tmp_path, faultload_target=target, faultload_baseline="none"), environ={"FAULTLOAD_HOME": str(home)}
    )
    assert off.baseline is None and "--faultload-baseline none" in off.baseline_note and off.baseline_missing is None
    nightly = SuiteOptions(
        FakeConfig(tmp_path, faultload_target=target, faultload_profile="nightly"),
        environ={"FAULTLOAD_HOME": str(home)},
    )
    assert nightly.baseline is None and nightly.baseline_note == ""
    release = SuiteOptions(FakeConfig(tmp_path), environ={"FAULTLOAD_HOME": str(home)})
    assert release.baseline is None and release.baseline_note == ""


def test_a_base_is_compared_with_by_default_and_must_be_installed(tmp_path) -> None:
    target = _checkout(tmp_path, "0.4.0.dev3")
    base_dir = tmp_path / "base"
    base_dir.mkdir()
    (base_dir / "pyproject.toml").write_text('[project]\nname = "skyrl"\nversion = "0.4.0"\n')
    base, home = f"skyrl@{base_dir}", tmp_path / "home"
    environ = {"FAULTLOAD_HOME": str(home)}
    with pytest.raises(pytest.UsageError, match=f"--faultload-base {base}: not installed"):
        SuiteOptions(FakeConfig(tmp_path, faultload_target=target, faultload_base=base), environ=environ)
    venv = home / "targets" / parse_target(base).venv_name
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / STAMP).write_text("{}")
    opts = SuiteOptions(
        FakeConfig(tmp_path, faultload_target=target, faultload_base=base, faultload_fix=["plain-tracebacks"]),
        environ=environ,
    )
    assert opts.base == base and opts.baseline == parse_build(f"{base}+fix=plain-tracebacks")
    assert "compared with its base" in opts.baseline_note and opts.baseline_missing is None
    given = SuiteOptions(
        FakeConfig(tmp_path, faultload_target=target, faultload_base=base, faultload_baseline="skyrl==0.4.0"),
        environ=environ,
    )
    assert given.baseline == parse_build("skyrl==0.4.0")  # the baseline input still overrides it
    with pytest.raises(pytest.UsageError, match="a tuft build"):
        SuiteOptions(FakeConfig(tmp_path, faultload_target=target, faultload_base="tuft==0.2.2"), environ=environ)
