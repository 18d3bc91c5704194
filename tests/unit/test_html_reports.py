"""The comparison's, the matrix's and the suite session's HTML pages (``compare --html``, ``matrix --html``,
``pytest faultload --faultload-html``), each built from plain data: no server starts, no trial runs.

Each page must fetch nothing and show every row in its own state: a worse metric worse and an unmeasured one
unknown (never ok), a caught row caught, an unknown cell unknown and a skipped one skipped (never clean), a
failed property's shrink path and links to its repro's files. A bad output path is refused in one line before
anything runs. Headless Chromium opens one page of each type without a console message (skipped without
Chromium, failed under ``make test``: conftest's ``require_built``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import faultload.suite.session  # noqa: F401  loaded in this process first: pytester's runs drop what they import
from faultload.checker.budgets import Budgets
from faultload.checker.judge import judge
from faultload.cli import many_trials
from faultload.cli.main import main as cli_main
from faultload.compare.html import compare_page
from faultload.compare.judge import comparison_json
from faultload.compare.report import markdown_table
from faultload.compare.runner import SideTrial, abba
from faultload.host.workspace import Workspace
from faultload.matrix.run import SCHEMA as MATRIX_SCHEMA
from faultload.matrix.run import judge_row
from faultload.model.build import parse_build
from faultload.record.trial import TrialResult
from faultload.store import html
from faultload.store.html_matrix import matrix_page, write_matrix_html
from faultload.store.html_suite import shrink_path, suite_page, write_suite_html
from faultload.store.repro import figures_of
from faultload.suite.executor import TrialOutcome
from faultload.suite.repros import write_property_repro
from faultload.suite.state import PropertyState, Tally
from faultload.suite.summary import summary_dict
from tests.unit.test_bundle import full  # noqa: F401 - the hand-built TrialResult with faults and a collapse
from tests.unit.test_compare import _compare, report
from tests.unit.test_html_report import FETCH, chromium_dom
from tests.unit.test_matrix import CLEAN, ROW, prop
from tests.unit.test_report import result  # noqa: F401 - what ``full`` builds on

pytest_plugins = ["pytester"]


def _offline(page: str) -> None:
    """A whole page whose browser refuses any fetch, and which asks for none."""
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n") and "default-src 'none'" in page
    assert not FETCH.search(page), FETCH.search(page).group(0)
    assert "<script src" not in page.lower() and "<link" not in page.lower()


def _tr(page: str, anchor: str) -> str:
    """The table row holding ``anchor`` (an ``id="..."`` or a ``data-...`` attribute)."""
    found = re.search(rf'<tr class="(\w*)">(?:(?!</tr>).)*{re.escape(anchor)}.*?</tr>', page, re.S)
    assert found, f"no row with {anchor}"
    return found.group(0)


def _cell(page: str, row_label: str, invariant: str) -> str:
    """The state of ``invariant``'s cell in the grid row labelled ``row_label``."""
    grid = page.split('<div class="scroll grid">', 1)[1].split("</div>", 1)[0]
    row = re.search(
        rf"<tr class=\"\w*\"><td class=\"\">(?:<a [^>]*>|<strong>)?{re.escape(row_label)}<.*?</tr>", grid, re.S
    )
    assert row, f"no grid row {row_label}"
    found = re.search(rf'<span class="cell (\w+)" data-invariant="{re.escape(invariant)}">', row.group(0))
    assert found, f"no {invariant} cell in {row_label}"
    return found.group(1)


# --------------------------------------------------------------------------- the comparison


def comparison() -> tuple[dict, list[SideTrial]]:
    """5 trials a side (ABBA): the candidate's CPU per request 1.4x (worse), its /healthz unmeasured once
    (unknown), one trial violating an invariant; each trial's completions per second over 60 s."""
    base = [report(cpu_s=c) for c in (2.0, 2.1, 1.9, 2.05, 1.95)]
    cand = [report(cpu_s=c) for c in (2.8, 2.9, 2.7, 2.85, 2.75)]
    cand[2]["server"]["healthz_latency_s"] = {"p99": None}
    rng = np.random.default_rng(5)
    trials, seen = [], {"baseline": iter(base), "candidate": iter(cand)}
    for i, side in enumerate(abba(5)):
        rep = {
            **next(seen[side]),
            "completed": 1000,
            "wall_s": 9.5,
            "load_s": 4.0,
            "invariants": [{"name": "no_collapse", "ok": i != 3}],
        }
        t = np.arange(0.0, 60.0, 1.0)
        build = parse_build("skyrl==0.4.0" if side == "baseline" else "skyrl==0.4.0+regress=rich-access-log")
        trials.append(SideTrial(side, build, i, rep, (t, rng.poisson(250, t.size).astype(float)), i != 3))
    result = _compare(base, cand)
    result["trials"] = [t.summary() for t in trials]
    return result, trials


def test_the_comparison_page_shows_each_metric_in_its_state_and_the_table_of_markdown_out() -> None:
    result, trials = comparison()
    assert result["worse"] == ["server_cpu_ms_per_request"] and result["unknown"] == ["healthz_p99_s"]
    page = compare_page(result, trials)
    _offline(page)
    states = {m["name"]: "unknown" if m["unknown"] else "worse" if m["worse"] else "ok" for m in result["metrics"]}
    for name, state in states.items():
        row = _tr(page, f'id="metric-{name}"')
        assert row.startswith(f'<tr class="{state}">') and f'<span class="state">{state}</span>' in row, row
        assert f'<g class="row {state}" data-label="{name}">' in page  # the ratio chart's row
    chart = page.split('data-label="healthz_p99_s">', 1)[1].split("</g>", 1)[0]
    assert "<circle" not in chart and "unknown: not measured" in chart  # nothing drawn for what was not measured
    worse = page.split('data-label="server_cpu_ms_per_request">', 1)[1].split("</g>", 1)[0]
    assert "<circle" in worse and "WORSE" in worse and 'stroke="#000"' in worse  # dot, threshold line
    for line in markdown_table(result).splitlines()[4:12]:  # the Markdown's metric rows, cell for cell
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        row = _tr(page, f'id="metric-{cells[0]}"')
        assert all(html.esc(c) in row for c in cells), (cells, row)
    assert "Verdict: worse: server_cpu_ms_per_request; unknown: healthz_p99_s" in page
    assert _tr(page, ">03<").startswith('<tr class="violated">') and "VIOLATED: no_collapse" in _tr(page, ">03<")
    spec = json.loads(re.search(r'id="faultload-charts">(.*?)</script>', page, re.S).group(1))
    (panel,) = spec["panels"]
    assert [s["label"] for s in panel["series"]] == [f"{t.order:02d} {t.side}" for t in trials]
    assert len(panel["x"]) == 60 and panel["series"][0]["y"][:3] == trials[0].timeline[1][:3].tolist()


def test_the_comparison_page_from_its_json_alone_has_no_script_and_draws_an_unbounded_ratio_at_the_edge() -> None:
    result = json.loads(comparison_json(_compare([report(throughput=0.0)] * 3, [report()] * 3)))
    page = compare_page(result)
    _offline(page)
    assert "<script" not in page and "No timeline" in page
    row = page.split('data-label="throughput_per_s">', 1)[1].split("</g>", 1)[0]
    assert "∞" in row and "<circle" in row
    xs = [float(v) for v in re.findall(r'(?:cx|x1|x2)="([-0-9.]+)"', page)]
    assert xs and all(0 <= v <= 980 for v in xs)  # inside the chart, infinity included


def test_the_comparison_is_written_after_its_json(tmp_path: Path) -> None:
    result, trials = comparison()
    args = argparse.Namespace(
        trials_out=None,
        plot=None,
        json_out=str(tmp_path / "c.json"),
        markdown_out=None,
        junit_xml=None,
        html=str(tmp_path / "c.html"),
    )
    many_trials.write_comparison(args, result, trials)
    assert json.loads((tmp_path / "c.json").read_text())["worse"] == ["server_cpu_ms_per_request"]
    assert 'data-label="server_cpu_ms_per_request"' in (tmp_path / "c.html").read_text()
    assert not list(tmp_path.glob("*.tmp"))  # written whole, through a temporary file


# --------------------------------------------------------------------------- the matrix


def matrix(logs: Path) -> dict:
    """Three rows: caught as expected (one invariant left unknown, one only skipped), clean as expected, and a
    row caught by another invariant than its own (not as expected)."""
    tallies = {
        "no_lost_results": {"judged": 5, "unknown": 0, "skipped": 1},
        "bounded_cpu": {"judged": 0, "unknown": 5, "skipped": 1},
        "healthz_latency": {"judged": 0, "unknown": 0, "skipped": 6},
    }
    caught = {
        "profile": "ci",
        "trials": 5,
        "judged_trials": 5,
        "invariants": tallies,
        "properties": [
            {
                **prop("test_no_lost_results", "failed", ["no_lost_results"], 3),
                "evidence": {"no_lost_results": "3 lost"},
            }
        ],
    }
    clean = {
        "profile": "ci",
        "trials": 9,
        "judged_trials": 9,
        "properties": [prop(f"p{i}", "passed") for i in range(9)],
        "invariants": {
            "no_lost_results": {"judged": 9, "unknown": 0, "skipped": 0},
            "bounded_cpu": {"judged": 0, "unknown": 9, "skipped": 0},
        },
    }
    wrong = {**caught, "properties": [prop("test_health", "failed", ["healthz_latency"], 5)]}
    rows = [
        judge_row(ROW, caught, 1, 120.0),
        judge_row(CLEAN, clean, 0, 300.0),
        dataclasses.replace(judge_row(ROW, wrong, 1, 60.0), row="retention-again"),
    ]
    return {
        "schema": MATRIX_SCHEMA,
        "profile": "ci",
        "session_s": None,
        "wall_s": 480.0,
        "ok": all(r.as_expected for r in rows),
        "logs": str(logs),
        "rows": [dataclasses.asdict(r) for r in rows],
    }


def test_the_matrix_page_shows_each_row_and_cell_in_its_state(tmp_path: Path) -> None:
    data = matrix(tmp_path)
    page = matrix_page(data)
    _offline(page)
    assert "<script" not in page and "NOT every row as expected" in page
    retention = _tr(page, 'id="row-retention"')
    assert retention.startswith('<tr class="expected">') and 'data-result="caught">caught</span>' in retention
    assert f'href="{Path("/r/test_no_lost_results.json").as_uri()}">3 requests</a>' in retention  # the repro
    assert f'href="{(tmp_path / "retention.log").as_uri()}">log</a>' in retention and "2.0 min" in retention
    assert "caught by no_lost_results" in retention and "no_lost_results: 3 lost" in retention
    assert _tr(page, 'id="row-clean"').startswith('<tr class="expected">')
    wrong = _tr(page, 'id="row-retention-again"')
    assert wrong.startswith('<tr class="unexpected">') and "caught (unexpected: healthz_latency)" in wrong
    assert _cell(page, "retention", "no_lost_results") == "caught"
    assert _cell(page, "retention", "bounded_cpu") == "unknown"  # judged by no trial: never clean
    assert _cell(page, "retention", "healthz_latency") == "skipped"
    assert _cell(page, "clean", "no_lost_results") == "clean" and _cell(page, "clean", "bounded_cpu") == "unknown"
    assert _cell(page, "clean", "healthz_latency") == "none"  # not asserted by the row
    assert _cell(page, "retention-again", "healthz_latency") == "caught"
    grid = page.split('<div class="scroll grid">', 1)[1]
    assert '<tr class="unexpected"><td class=""><a href="#row-retention-again">' in grid  # the row's own state


def test_a_cell_is_clean_only_when_a_trial_judged_it() -> None:
    assert html.tally_state({"judged": 0, "unknown": 3, "skipped": 9}, False) == "unknown"
    assert html.tally_state({"judged": 0, "unknown": 0, "skipped": 2}, False) == "skipped"
    assert html.tally_state({"judged": 1, "unknown": 9, "skipped": 9}, False) == "clean"
    assert html.tally_state(None, False) == "none" and html.tally_state(None, True) == "caught"


def test_the_matrix_command_writes_its_page(tmp_path: Path, monkeypatch) -> None:
    data = matrix(tmp_path)
    monkeypatch.setattr(many_trials.matrix_mod, "run_matrix", lambda *args, **kwargs: data)  # no row runs
    code = cli_main(
        ["matrix", "--rows", "retention", "--json-out", str(tmp_path / "m.json"), "--html", str(tmp_path / "m.html")],
        environ={},
    )
    assert code == 1  # not every row as expected
    assert json.loads((tmp_path / "m.json").read_text())["rows"][0]["row"] == "retention"
    assert 'id="row-retention-again"' in (tmp_path / "m.html").read_text()


@pytest.mark.parametrize(
    "command",
    [["matrix"], ["compare", "--baseline", "skyrl==0.4.0", "--candidate", "skyrl==0.4.0+regress=rich-access-log"]],
)
def test_a_bad_html_path_is_refused_before_anything_runs(tmp_path: Path, capsys, command: list[str]) -> None:
    code = cli_main([*command, "--html", str(tmp_path / "missing" / "r.html")], environ={})
    err = capsys.readouterr().err
    assert code == 2 and err.strip().splitlines() == [
        f"faultload: error: --html: no such directory: {tmp_path / 'missing'}"
    ]


# --------------------------------------------------------------------------- the suite session

STEPS = [
    {"step": "1 request", "requests": 1, "still_fails": False, "seconds": 1.4},
    {"step": "96 requests", "requests": 96, "still_fails": True, "seconds": 22.8},
    {"step": "48 requests", "requests": 48, "still_fails": True, "seconds": 13.9},
    {"step": "no delayed polls", "requests": 48, "still_fails": True, "seconds": 12.2},
    {"step": "24 requests", "requests": 24, "still_fails": False, "seconds": 3.0},
]


def session_summary(repros: Path) -> dict:
    """A session of two properties: one failed (shrunk 192 -> 48 requests, its repro written with its page),
    one passed with an invariant no trial judged."""
    failed = {
        **prop("test_no_lost_results", "failed", ["no_lost_results"], 48),
        "evidence": {"no_lost_results": "3 lost of 3 accepted"},
        "trials": 12,
        "cached": 3,
        "not_run": 4,
        "judged_trials": 10,
        "first_failure_requests": 192,
        "shrink_s": 55.0,
        "failing_examples": 7,
        "shrink_cut": True,
        "reduce_steps": STEPS,
        "repro_path": str(repros / "r.json"),
        "html_path": str(repros / "r.html"),
        "bundle_path": str(repros / "r.bundle"),
        "unjudged": [],
        "invariants": {
            "no_lost_results": {"judged": 10, "unknown": 1, "skipped": 4},
            "futures_resolve": {"judged": 10, "unknown": 1, "skipped": 4},
        },
    }
    passed = {
        **prop("test_bounded_resources", "passed"),
        "trials": 6,
        "cached": 0,
        "not_run": 0,
        "judged_trials": 6,
        "unjudged": [],
        "failing_examples": 0,
        "reduce_steps": [],
        "invariants": {
            "bounded_fds": {"judged": 6, "unknown": 0, "skipped": 0},
            "bounded_cpu": {"judged": 0, "unknown": 6, "skipped": 0},
        },
    }
    total = {name: t for p in (failed, passed) for name, t in p["invariants"].items()}
    return {
        "profile": "ci",
        "target": "skyrl==0.4.0",
        "regress": ["retention"],
        "fixes": [],
        "baseline": None,
        "trials": 18,
        "wall_s": 400.0,
        "stack_starts": 1,
        "judged_trials": 16,
        "phases_s": {"load": 300.0},
        "trial_wall_s": 320.0,
        "load_share": 0.94,
        "invariants": total,
        "properties": [failed, passed],
    }


def test_the_suite_page_shows_each_property_its_cells_and_a_failures_shrink_path(tmp_path: Path) -> None:
    page = suite_page(session_summary(tmp_path))
    _offline(page)
    assert "<script" not in page and "1 of 2 failed" in page and "regress retention" in page
    failed = _tr(page, 'href="#failure-test_no_lost_results"')
    assert failed.startswith('<tr class="failed">') and "10 judged, 1 all unknown, 4 not run" in failed
    assert '<td class="num">7</td>' in failed  # failing examples
    assert _tr(page, ">test_bounded_resources<").startswith('<tr class="passed">')
    assert _cell(page, "test_no_lost_results", "no_lost_results") == "violated"
    assert _cell(page, "test_no_lost_results", "futures_resolve") == "clean"
    assert _cell(page, "test_bounded_resources", "bounded_cpu") == "unknown"  # never shown clean
    assert _cell(page, "test_bounded_resources", "no_lost_results") == "none"
    assert _cell(page, "session", "no_lost_results") == "violated"
    section = page.split('id="failure-test_no_lost_results"', 1)[1]
    assert "192 → 48 requests over 7 failing examples in 55 s (cut by the shrink budget)" in section
    assert "Shrink path: 192 → 96 → 48 requests." in section
    assert section.count("still fails: kept") == 3 and section.count("passed: not kept") == 2
    for name in ("r.json", "r.html", "r.bundle"):
        assert f'href="{(tmp_path / name).as_uri()}"' in section
    assert f"faultload replay {tmp_path / 'r.json'}" in section and "3 lost of 3 accepted" in section


def test_the_shrink_path_ends_at_the_repro() -> None:
    prop_ = {"first_failure_requests": 192, "repro_requests": 12, "reduce_steps": STEPS}
    assert shrink_path(prop_) == [192, 96, 48, 12]  # Hypothesis shrank past the last reduction kept


def test_a_failed_propertys_repro_has_its_trial_page_and_the_summary_links_it(
    full: TrialResult,  # noqa: F811
    tmp_path: Path,
) -> None:
    budgets = Budgets()
    verdicts = judge(full, budgets)
    state = PropertyState(
        "faultload/suite/test_properties.py::test_p",
        first_failure_requests=24,
        failures=3,
        shrink_cut=False,
        reduce_log=STEPS[:2],
    )
    state.best = (full.config, TrialOutcome(verdicts, figures_of(verdicts), 12, 5.0, result=full))
    state.tally = {"no_collapse": Tally(judged=2)}
    path = write_property_repro(state, "ci", Workspace(tmp_path), budgets)
    repro = json.loads(path.read_text())
    assert repro["html"] == str(state.html_path) == str(path.with_suffix(".html"))
    assert state.html_path.read_text().count('id="inv-no_collapse"') == 1  # the trial's own page
    runner = SimpleNamespace(
        states={state.nodeid: state},
        profile=SimpleNamespace(name="ci"),
        target="skyrl==0.4.0",
        regress=(),
        fixes=(),
        baseline=None,
        trials=3,
        session_started=0.0,
        stack_starts=1,
        phases_s={},
        not_judged=lambda nodeid: None,
    )
    (found,) = summary_dict(runner, {state.nodeid: "failed"})["properties"]
    assert (found["failing_examples"], found["shrink_cut"], found["reduce_steps"]) == (3, False, STEPS[:2])
    assert found["html_path"] == str(state.html_path) and found["repro_path"] == str(path)
    page = suite_page(summary_dict(runner, {state.nodeid: "failed"}))
    assert f'href="{state.html_path.as_uri()}"' in page and f'href="{path.as_uri()}"' in page


def test_the_plugin_writes_the_page_and_refuses_a_bad_path_at_once(pytester: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.delenv("FAULTLOAD_HOME", raising=False)
    bad = pytester.path / "missing" / "s.html"
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--collect-only", "-q", "--pyargs", "faultload.suite", "--faultload-html", str(bad)
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line.strip()] == [
        f"ERROR: --faultload-html: no such directory: {bad.parent}"
    ]
    assert not bad.parent.exists()
    good = pytester.path / "s.html"
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--collect-only", "-q", "--pyargs", "faultload.suite", "--faultload-html", str(good)
    )
    assert result.ret == 0, result.stdout.str()
    page = good.read_text()
    _offline(page)
    assert "no property ran" in page


# --------------------------------------------------------------------------- in a browser


def _compare_file(tmp_path: Path) -> tuple[Path, list[str]]:
    result, trials = comparison()
    path = tmp_path / "compare.html"
    path.write_text(compare_page(result, trials))
    return path, [f'data-label="{m["name"]}"' for m in result["metrics"]] + ['data-charts="1"', 'class="uplot']


def _matrix_file(tmp_path: Path) -> tuple[Path, list[str]]:
    path = write_matrix_html(matrix(tmp_path), tmp_path / "matrix.html")
    return path, ['id="row-retention"', 'id="row-retention-again"', 'class="cell unknown"', 'class="cell caught"']


def _suite_file(tmp_path: Path) -> tuple[Path, list[str]]:
    path = write_suite_html(session_summary(tmp_path), tmp_path / "suite.html")
    return path, ['id="failure-test_no_lost_results"', 'class="cell violated"', 'class="cell unknown"']


@pytest.mark.parametrize("build", [_compare_file, _matrix_file, _suite_file], ids=["compare", "matrix", "suite"])
def test_chromium_opens_each_page_without_a_console_message(tmp_path: Path, build) -> None:
    path, wanted = build(tmp_path)
    dom = chromium_dom(path, tmp_path)
    missing = [w for w in wanted if w not in dom]
    assert not missing, missing
    assert '<p class="chart-error">chart ' not in dom  # a chart report.js could not draw
