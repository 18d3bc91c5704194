"""faultload compare's parts that need no server: build specs, metrics from reports, the ratio and its
interval, the verdict rule, ABBA order, the table, and bad input (exit 2, nothing started)."""

from __future__ import annotations

import json
import math

import pytest

from faultload.cli.main import main
from faultload.compare.judge import (
    DEFAULT_THRESHOLDS,
    SCHEMA,
    CompareSettings,
    comparison_json,
    interval_of,
    judge_comparison,
    load_compare_settings,
    ratio_of,
)
from faultload.compare.metrics import METRIC_NAMES, MIN_SAMPLES, read_metrics
from faultload.compare.report import markdown_table
from faultload.compare.runner import abba
from faultload.compare.stats import ratio_of_medians
from faultload.model.build import Build, parse_build


def report(
    cpu_s: float = 2.0,
    attempts: int = 2000,
    throughput: float = 500.0,
    p50: float = 0.5,
    p99: float = 1.5,
    healthz_p99: float = 0.01,
    peak_fds: int = 1100,
    peak_rss: int = 700 << 20,
    peak_in_flight: int = 1000,
    requested: int = 1000,
    samples: int = 5,
    submit_p50: float = 0.02,
) -> dict:
    """The parts of a trial's JSON report the comparison reads (a 2 s load: 5 monitor samples, 5 probes)."""
    return {
        "requested": requested,
        "completed": requested,
        "load_s": 2.0,
        "throughput_per_s": throughput,
        "attempts": {"http_attempts": attempts},
        "latency_s": {"submit": {"p50": submit_p50, "p99": 2 * submit_p50}, "e2e": {"p50": p50, "p99": p99}},
        "router": {"peak_in_flight": peak_in_flight},
        "server": {
            "cpu_s": cpu_s,
            "healthz_latency_s": {"p99": healthz_p99},
            "peak_fds": peak_fds,
            "baseline_fds": 100,
            "peak_rss_bytes": peak_rss,
            "baseline_rss_bytes": 600 << 20,
            "samples": samples,
            "healthz_probes": samples,
        },
    }


def test_a_build_is_a_target_and_its_switches_in_a_fixed_order() -> None:
    build = parse_build("skyrl==0.4.0+fix=plain-tracebacks+regress=rich-access-log,keepalive")
    assert build == Build("skyrl==0.4.0", ("keepalive", "rich-access-log"), ("plain-tracebacks",))
    assert build.text == "skyrl==0.4.0+regress=keepalive,rich-access-log+fix=plain-tracebacks"
    assert parse_build(build.text) == build
    assert parse_build("skyrl==0.3.0") == Build("skyrl==0.3.0")


@pytest.mark.parametrize(
    "text, says",
    [
        ("skyrl==9.9", "version '9.9' is not X.Y.Z"),
        ("skyrl==0.4.0+regress=nope", "unknown regression 'nope'"),
        ("skyrl==0.4.0+fix=", "+fix= needs switch names"),
        ("+fix=plain-tracebacks", "no target before the switches"),
        ("url=http://127.0.0.1:8000+regress=retention", "switches need a target faultload launches"),
    ],
)
def test_a_bad_build_names_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="--baseline") as info:
        parse_build(text, "--baseline")
    assert says in str(info.value)


def test_metrics_are_read_from_the_report_and_none_when_not_measured() -> None:
    m = read_metrics(report())
    assert m["server_cpu_ms_per_request"] == 1.0 and m["throughput_per_s"] == 500.0
    assert m["fds_per_in_flight"] == 1.0 and m["rss_bytes_per_in_flight"] == (100 << 20) / 1000
    assert m["attempts_per_request"] == 2.0 and m["e2e_p99_s"] == 1.5 and m["healthz_p99_s"] == 0.01
    assert m["submit_p50_s"] == 0.02 and m["submit_p99_s"] == 0.04 and m["router_peak_in_flight"] == 1000.0
    assert m["rss_bytes_per_result"] == (100 << 20) / 1000
    blind = report()
    blind["server"] = {}
    assert {k for k, v in read_metrics(blind).items() if v is None} == {
        "server_cpu_ms_per_request",
        "healthz_p99_s",
        "fds_per_in_flight",
        "rss_bytes_per_in_flight",
        "rss_bytes_per_result",
    }


def test_a_load_too_short_to_sample_measures_no_server_figure() -> None:
    """A 0.6 s trial: the monitor sampled the server twice at most, its CPU read 0 (one sample)."""
    short = read_metrics(report(samples=MIN_SAMPLES - 1))
    assert {k for k, v in short.items() if v is None} == {
        "server_cpu_ms_per_request",
        "healthz_p99_s",
        "fds_per_in_flight",
        "rss_bytes_per_in_flight",
        "rss_bytes_per_result",
    }
    assert read_metrics(report(cpu_s=0.0))["server_cpu_ms_per_request"] is None  # a serving server spends CPU
    assert read_metrics(report(peak_in_flight=0))["router_peak_in_flight"] is None


def test_a_too_short_trial_makes_no_ratio_unknown_not_worse_and_not_ok() -> None:
    """The baseline's one-sample trials read server CPU 0: once x inf [inf, inf] "worse"; now unknown."""
    short = [report(cpu_s=0.0, samples=1) for _ in range(3)]
    result = _compare(short, [report(cpu_s=c) for c in (2.0, 2.1, 1.9)])
    row = next(r for r in result["metrics"] if r["name"] == "server_cpu_ms_per_request")
    assert row["unknown"] and row["ratio"] is None and not row["worse"]
    assert "server_cpu_ms_per_request" in result["unknown"] and "server_cpu_ms_per_request" not in result["worse"]
    assert result["ok"] is False


def test_the_ratio_of_medians_and_its_interval() -> None:
    est = ratio_of_medians([1.0, 1.1, 0.9, 1.05, 0.95], [1.3, 1.4, 1.25, 1.35, 1.5])
    assert est.baseline_median == 1.0 and est.candidate_median == 1.35 and est.ratio == pytest.approx(1.35)
    assert 1.0 < est.ci[0] < 1.35 < est.ci[1]
    same = ratio_of_medians([1.0, 1.1, 0.9], [1.0, 1.1, 0.9])
    assert same.ratio == 1.0 and same.ci[0] < 1.0 < same.ci[1]
    assert ratio_of_medians([0.0, 0.0], [0.0, 0.0]).ratio == 1.0  # both measured none: no change
    assert ratio_of_medians([2.0], [3.0]).ci == (1.5, 1.5)
    with pytest.raises(ValueError):
        ratio_of_medians([], [1.0])


def _compare(baseline: list[dict], candidate: list[dict], settings: CompareSettings | None = None) -> dict:
    return judge_comparison(
        "skyrl==0.4.0", "skyrl==0.4.0+regress=rich-access-log", baseline, candidate, settings or CompareSettings()
    )


def test_worse_needs_the_ratio_past_the_threshold_and_the_interval_past_one() -> None:
    base = [report(cpu_s=c) for c in (2.0, 2.1, 1.9, 2.05, 1.95)]
    result = _compare(base, [report(cpu_s=c) for c in (2.8, 2.9, 2.7, 2.85, 2.75)])
    assert result["schema"] == SCHEMA and result["repeats"] == 5 and not result["ok"]
    assert result["worse"] == ["server_cpu_ms_per_request"] and result["unknown"] == []
    row = next(r for r in result["metrics"] if r["name"] == "server_cpu_ms_per_request")
    assert set(row) >= {"name", "baseline_median", "candidate_median", "ratio", "ci", "threshold", "worse"}
    assert row["ratio"] == pytest.approx(1.4) and row["ci"][0] > 1.0 and row["threshold"] == 1.15
    # 10% more: under the threshold, not worse, whatever the interval says
    assert _compare(base, [report(cpu_s=c * 1.1) for c in (2.0, 2.1, 1.9, 2.05, 1.95)])["ok"]
    # past the threshold on one trial's noise: the interval reaches 1, not worse
    noisy = [report(cpu_s=c) for c in (1.9, 3.0, 2.0, 3.1, 1.95)]
    assert "server_cpu_ms_per_request" not in _compare(base, noisy)["worse"]


def test_a_ratio_over_a_zero_baseline_is_strict_json_and_still_judged() -> None:
    """0.3.0's collapse completed nothing: its throughput of 0 makes the ratio infinite (README's table)."""
    result = _compare([report(throughput=0.0) for _ in range(3)], [report(throughput=t) for t in (500, 510, 490)])
    row = next(r for r in result["metrics"] if r["name"] == "throughput_per_s")
    assert row["ratio"] is None and row["unbounded"] and not row["unknown"] and not row["worse"]
    assert ratio_of(row) == math.inf and interval_of(row) == (math.inf, math.inf)
    text = comparison_json(result)
    assert "Infinity" not in text and json.loads(text)["metrics"] == json.loads(json.dumps(result["metrics"]))
    assert "| throughput_per_s | 0 /s | 500 /s | ∞ | ∞ – ∞ |" in markdown_table(result)
    fds = _compare([report(peak_fds=100) for _ in range(3)], [report(peak_fds=p) for p in (1100, 1110, 1090)])
    assert fds["worse"] == ["fds_per_in_flight"]  # a measured 0 growth to some: worse, null in the JSON or not


def test_lower_throughput_is_worse_and_higher_is_not() -> None:
    base = [report(throughput=t) for t in (500, 510, 490)]
    assert _compare(base, [report(throughput=t) for t in (300, 310, 290)])["worse"] == ["throughput_per_s"]
    assert _compare(base, [report(throughput=t) for t in (800, 810, 790)])["ok"]


def test_an_unmeasured_metric_is_unknown_and_never_ok() -> None:
    blind = report()
    blind["server"]["healthz_latency_s"] = {"p99": None}
    result = _compare([report()] * 3, [report(), blind, report()])
    assert result["unknown"] == ["healthz_p99_s"] and result["worse"] == [] and result["ok"] is False


def test_abba_puts_each_side_first_as_often_as_second() -> None:
    assert abba(2) == ["baseline", "candidate", "candidate", "baseline"]
    assert abba(3).count("baseline") == abba(3).count("candidate") == 3
    with pytest.raises(ValueError, match="--repeats 0"):
        abba(0)


def test_thresholds_come_from_pyproject_and_bad_ones_are_one_line(tmp_path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.faultload.compare]\nserver_cpu_ms_per_request = 1.2\nconfidence = 0.9\n")
    settings = load_compare_settings(path)
    assert settings.thresholds["server_cpu_ms_per_request"] == 1.2 and settings.confidence == 0.9
    assert settings.thresholds["throughput_per_s"] == DEFAULT_THRESHOLDS["throughput_per_s"]
    assert load_compare_settings(None) == CompareSettings()
    for bad, says in (
        ("nope = 1.2", "unknown metric"),
        ("throughput_per_s = 1.2", "must be <= 1"),
        ("e2e_p99_s = 0.5", "must be >= 1"),
        ("confidence = 1.5", "not in [0.5, 1)"),
    ):
        path.write_text(f"[tool.faultload.compare]\n{bad}\n")
        with pytest.raises(ValueError) as info:
            load_compare_settings(path)
        assert says in str(info.value)


def test_the_table_has_a_row_per_metric_and_the_verdict() -> None:
    base = [report(cpu_s=c) for c in (2.0, 2.1, 1.9)]
    table = markdown_table(_compare(base, [report(cpu_s=c) for c in (2.8, 2.9, 2.7)]))
    assert table.count("\n| ") == len(METRIC_NAMES) + 2  # + the header and the separator rows
    assert "| server_cpu_ms_per_request | 1 ms | 1.4 ms | 1.400 |" in table
    assert "**worse**" in table and "Verdict: worse: server_cpu_ms_per_request" in table


def test_the_default_thresholds_cover_every_metric() -> None:
    assert set(DEFAULT_THRESHOLDS) == set(METRIC_NAMES)
    assert all(math.isfinite(v) for v in DEFAULT_THRESHOLDS.values())


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--baseline", "skyrl==9.9", "--candidate", "skyrl==0.4.0"], "--baseline: target 'skyrl==9.9'"),
        (["--baseline", "skyrl==0.4.0", "--candidate", "skyrl==0.4.0+regress=nope"], "unknown regression 'nope'"),
        (["--baseline", "skyrl==0.4.0", "--candidate", "skyrl==0.4.0", "--repeats", "0"], "--repeats 0"),
        (["--candidate", "skyrl==0.4.0"], "the following arguments are required: --baseline"),
        (
            ["--baseline", "skyrl==0.4.0", "--candidate", "skyrl==0.4.0", "--json-out", "/nonexistent/x.json"],
            "--json-out: no such directory",
        ),
    ],
)
def test_bad_compare_usage_is_one_line_and_exit_2(argv, says, capsys, tmp_path) -> None:
    assert main(["compare", *argv, "--workdir", str(tmp_path / "home")], environ={}) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not (tmp_path / "home").exists()  # nothing installed, started or written


def test_the_json_contract_is_plain_json() -> None:
    result = _compare([report()] * 2, [report()] * 2)
    assert json.loads(json.dumps(result)) == result


def test_an_interrupted_trial_ends_the_comparison(tmp_path) -> None:
    """run_comparison with a stand-in for run_trial (a test double) that reports its trial interrupted."""
    from types import SimpleNamespace

    from faultload.checker.budgets import Budgets
    from faultload.compare.runner import run_comparison
    from faultload.host.workspace import Workspace
    from faultload.model.trial import TrialConfig

    ran = []

    def interrupted_trial(config, workspace):
        ran.append(config.target)
        return SimpleNamespace(interrupted=True)

    builds = {"baseline": parse_build("skyrl==0.4.0"), "candidate": parse_build("skyrl==0.3.0")}
    with pytest.raises(KeyboardInterrupt):
        run_comparison(
            TrialConfig(target="skyrl==0.4.0"), builds, 2, Workspace(tmp_path), Budgets(), run=interrupted_trial
        )
    assert ran == ["skyrl==0.4.0"]  # nothing after the interrupted trial


def test_the_readme_tables_are_spliced_between_their_markers() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "compare_tables.py"
    spec = importlib.util.spec_from_file_location("compare_tables", path)
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    readme = "a\n<!-- compare:x -->\nold\n<!-- /compare:x -->\nb\n"
    assert tables.splice(readme, "x", "| new |\n") == "a\n<!-- compare:x -->\n| new |\n<!-- /compare:x -->\nb\n"
    with pytest.raises(ValueError, match="no <!-- compare:y -->"):
        tables.splice(readme, "y", "t")
    assert set(tables.COMPARISONS) >= {"0.3.0-0.4.0-barrier", "0.3.0-0.4.0-latency", "rich-access-log"}


def test_a_growth_of_rss_under_one_allocator_arena_is_none_and_two_such_sides_are_no_change() -> None:
    """125 KiB over 250 in flight (the allocator touching a page) against 0 was an infinite ratio, flagged."""
    small, none = report(peak_rss=(600 << 20) + (125 << 10), peak_in_flight=250), report(peak_rss=600 << 20)
    assert read_metrics(small)["rss_bytes_per_in_flight"] == 0.0
    result = judge_comparison("a", "b", [none] * 3, [small] * 3, CompareSettings())
    rows = {r["name"]: r for r in result["metrics"]}
    assert rows["rss_bytes_per_in_flight"]["ratio"] == 1.0 and "rss_bytes_per_in_flight" not in result["worse"]
    grown = report(peak_rss=(600 << 20) + (2 << 20), peak_in_flight=250)
    assert read_metrics(grown)["rss_bytes_per_in_flight"] == (2 << 20) / 250
