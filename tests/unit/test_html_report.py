"""The HTML report (faultload.store.html, html_timeline, html_trial; ``faultload run --html``), without a server.

The hand-built trial is test_bundle's ``full`` (test_report's ``result`` with faults, a collapse and a
server log), judged as a run judges it. The page must fetch nothing, show a row per verdict in its own
state, mark only the violation whose time the record keeps; headless Chromium must draw it without a
console message (skipped without Chromium, failed under ``make test``: conftest's ``require_built``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import require_built

from faultload.checker.budgets import Budgets
from faultload.checker.inputs import Verdict
from faultload.checker.judge import judge
from faultload.cli import commands
from faultload.cli.main import main as cli_main
from faultload.host.workspace import Workspace
from faultload.model.trial import TrialConfig
from faultload.record.history import AttemptKind, ErrorClass, History, Outcome
from faultload.record.trial import TrialResult
from faultload.store import html
from faultload.store.html_timeline import error_times, retry_times, timeline
from faultload.store.html_trial import WORDS, trial_page, write_trial_html
from tests.unit.test_bundle import full  # noqa: F401 - the hand-built TrialResult with faults and a collapse
from tests.unit.test_report import result  # noqa: F401 - what ``full`` builds on

# A fetch of anything: a script or style or image by URL (absolute or protocol-relative), a CSS import.
FETCH = re.compile(
    r"""(?:\bsrc|\bhref|\baction)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//|@import""", re.IGNORECASE
)


def _spec(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="faultload-charts">(.*?)</script>', page, re.S)
    assert found, "no chart spec in the page"
    return json.loads(found.group(1))


def _row(page: str, name: str) -> str:
    found = re.search(rf'<tr class="(\w+)"><td[^>]*><span id="inv-{name}">.*?</tr>', page, re.S)
    assert found, f"no verdict row for {name}"
    return found.group(0)


def test_the_page_fetches_nothing_and_has_a_row_per_verdict_in_its_state(full: TrialResult, tmp_path: Path) -> None:  # noqa: F811
    verdicts = judge(full, Budgets())
    path = write_trial_html(full, verdicts, tmp_path / "trial.html")
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "default-src 'none'" in page  # the browser refuses any fetch
    assert not FETCH.search(page), FETCH.search(page).group(0)
    assert "<script src" not in page.lower() and "<link" not in page.lower()
    states = {True: "held", False: "violated", None: "unknown"}
    for v in verdicts:
        row = _row(page, v.name)
        assert row.startswith(f'<tr class="{states[v.ok]}">') and WORDS[states[v.ok]] in row, row
    assert {v.ok for v in verdicts} == {True, False, None}  # the fixture shows every judged state
    collapse = _row(page, "no_collapse")
    assert "VIOLATED" in collapse and "t=12.50 s" in collapse  # the watchdog's onset, kept in the record
    for name in ("training_futures", "heartbeats_answered"):  # not judged: the trial ran no training mix
        assert _row(page, name).startswith('<tr class="skipped">') and "no training mix" in _row(page, name)
    assert "VIOLATED" in page[: page.index("<h2>")]  # the header's summary


def test_only_a_violation_the_record_times_is_marked(full: TrialResult) -> None:  # noqa: F811
    verdicts = judge(full, Budgets())
    page = trial_page(full, verdicts)
    spec = _spec(page)
    assert spec["marks"] == [{"t": 12.5, "label": "no_collapse: fd_exhaustion"}]
    untimed = [v.name for v in verdicts if v.ok is False and v.name != "no_collapse"]
    assert untimed and all(name in page.split("Not placed in time", 1)[1].split("</p>")[0] for name in untimed)
    # applied -> healed; the fault whose apply failed has no window
    assert spec["faults"] == [
        {"start": 1.001, "end": 3.003, "label": "edge:reset_peer:timeout=0@1.0+2.0", "color": "#d62728"}
    ]
    ids = [p["id"] for p in spec["panels"]]
    assert ids == ["latency", "completions", "errors", "retries", "in_flight", "fds", "rss", "healthz"]


def test_a_violation_without_a_collapse_record_is_listed_unmarked(full: TrialResult) -> None:  # noqa: F811
    full.verdict = None
    verdicts = [
        Verdict(name="no_collapse", ok=False, figure=1, budget=0, head="collapse at t=3s"),
        Verdict(name="bounded_fds", ok=None, figure=None, budget=None, head="x"),
    ]
    page = trial_page(full, verdicts)
    assert _spec(page)["marks"] == []  # a time in words is not a time the record keeps
    row = _row(page, "no_collapse")
    assert row.startswith('<tr class="violated">') and '<td class="num">-</td>' in row  # first seen: not known
    assert "no_collapse" in page.split("Not placed in time", 1)[1].split("</p>")[0]
    assert _row(page, "bounded_fds").startswith('<tr class="unknown">')


def test_the_timeline_bins_match_numpy_and_its_size_does_not_grow_with_requests() -> None:
    rng = np.random.default_rng(3)
    t, v = rng.uniform(0, 10, 5000), rng.lognormal(0, 1, 5000)
    edges = html.time_edges(10.0)
    assert edges.size - 1 <= html.MAX_BINS and edges[-1] >= 10.0
    q = html.binned_quantiles(t, v, edges, (0.5, 0.99))
    bins = np.searchsorted(edges, t, side="right") - 1
    for b in (0, 17, edges.size - 2):
        np.testing.assert_allclose(q[:, b], np.percentile(v[bins == b], [50, 99]))
    sizes = [len(json.dumps(timeline(_trial(n)))) for n in (2_000, 200_000)]
    assert sizes[1] < 1.5 * sizes[0], sizes


def _trial(requests: int) -> TrialResult:
    rng = np.random.default_rng(requests)
    h = History.empty(requests)
    h["submit_start"][:] = np.sort(rng.uniform(0, 60, requests))
    h["submit_end"][:] = h["submit_start"] + 0.01
    h["done"][:] = h["submit_start"] + rng.lognormal(0, 0.3, requests)
    h["outcome"][:] = Outcome.OK
    return TrialResult(TrialConfig(target="skyrl==0.4.0"), h, load_s=60.0)


def test_errors_and_retries_are_read_from_the_attempt_log() -> None:
    h = History.empty(2)
    h["done"][:] = [1.0, 2.0]
    h["error"][:] = [ErrorClass.NONE, ErrorClass.INTEGRITY]
    h.attempts = {
        "row": np.array([0, 0, 0, 1, 1, 1], dtype=np.int32),
        "kind": np.array(
            [
                AttemptKind.SUBMIT,
                AttemptKind.SUBMIT,
                AttemptKind.POLL,
                AttemptKind.SUBMIT,
                AttemptKind.POLL,
                AttemptKind.POLL,
            ],
            dtype=np.uint8,
        ),
        "start": np.array([0.1, 0.2, 0.3, 0.1, 0.4, 0.9], dtype=np.float32),
        "end": np.array([0.15, 0.25, 0.5, 0.2, 0.8, 1.9], dtype=np.float32),
        "status": np.array([-ErrorClass.RESET, 200, 200, 200, 408, 503], dtype=np.int16),
    }
    found = {cls: times.tolist() for cls, times in error_times(h).items()}
    assert found == {
        ErrorClass.RESET: [pytest.approx(0.15)],
        ErrorClass.HTTP_5XX: [pytest.approx(1.9)],
        ErrorClass.INTEGRITY: [2.0],
    }  # a 408 is the poll's hold ending, not an error
    again = retry_times(h)
    assert again["submit"].tolist() == [pytest.approx(0.2)] and again["poll"].tolist() == [pytest.approx(0.9)]


def test_the_vendored_chart_library_carries_its_license() -> None:
    head = html.asset("uPlot.iife.min.js")[:1500]
    assert "The MIT License (MIT)" in head and "Copyright (c) 2022 Leon Sorokin" in head and "uPlot v1.6.32" in head


def test_the_html_report_loads_no_trial_runner_nor_matplotlib() -> None:
    """A stored trial's page is built as its report is (offline), and ``--html`` needs no ``plot`` extra."""
    code = "import json, sys, faultload.store.html_trial\nprint(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.splitlines()[-1]
    )
    heavy = [
        m
        for m in loaded
        if m in ("aiohttp", "toxiproxy", "requests", "httpx", "psutil", "tinker")
        or m.startswith(("matplotlib", "faultload.run", "faultload.faults", "faultload.client", "faultload.router"))
    ]
    assert not heavy


def test_a_bad_html_path_is_refused_before_the_trial(tmp_path: Path, capsys) -> None:
    for command in ("run", "confirm"):
        code = cli_main([command, "--html", str(tmp_path / "missing" / "r.html"), "--quiet"], environ={})
        err = capsys.readouterr().err
        assert code == 2 and err.strip().splitlines() == [
            f"faultload: error: --html: no such directory: {tmp_path / 'missing'}"
        ]


def test_the_run_writes_the_page_and_names_it_in_the_report(full: TrialResult, tmp_path: Path) -> None:  # noqa: F811
    args = argparse.Namespace(history=None, bundle=None, plot=None, html=str(tmp_path / "r.html"))
    report: dict = {}
    keep = commands._Keeper(Workspace(tmp_path / "home"))
    assert commands._write_extras(args, full, report, Budgets(), judge(full, Budgets()), keep)
    assert report["html_path"] == str(tmp_path / "r.html") and (tmp_path / "r.html").read_text().endswith("</html>\n")
    assert not list(tmp_path.glob("*.tmp"))  # written whole, through a temporary file


def chromium_dom(path: Path, tmp_path: Path) -> str:
    """The page at ``path`` as headless Chromium rendered it (its DOM after the scripts ran), failing on any
    console message: an error, a refused fetch (the CSP), or anything the page logged. Skipped without
    Chromium, failed under ``make test`` (conftest's ``require_built``)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    require_built("chromium (headless, for the HTML report)", browser is not None, "apt-get install -y chromium")
    out = subprocess.run(
        [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--enable-logging=stderr",
            "--v=0",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1200,2000",
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    console = [line for line in out.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console
    return out.stdout


def test_chromium_draws_the_page_without_a_console_message(full: TrialResult, tmp_path: Path) -> None:  # noqa: F811
    verdicts = judge(full, Budgets())
    path = write_trial_html(full, verdicts, tmp_path / "trial.html")
    dom = chromium_dom(path, tmp_path)
    panels = len(_spec(path.read_text())["panels"])
    assert f'data-charts="{panels}"' in dom and '<p class="chart-error">chart ' not in dom
    assert dom.count('class="uplot') == panels and dom.count("<canvas") >= panels
    for v in verdicts:
        assert f'id="inv-{v.name}"' in dom
