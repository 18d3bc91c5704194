"""The HTML report's charts two ways, side by side: uPlot fed JSON vs matplotlib rendered into the page.

A benchmark, not a test. One synthetic trial per size (4,096 requests, a ``faultload run``'s size, and
131,072, a confirm run's), built here by hand at 256 requests/s (the default router's rate): latencies
around 1 s, an ``edge:reset_peer`` fault over 15% of the load whose victims are reset once and submit
again, the monitor's samples and ``/healthz`` probes every 0.5 s, a collapse called inside the fault
(a violation with a time, so the page carries a mark). It is judged once (``checker.judge``), then its
page is built each way from the same timeline spec (``store.html_timeline.timeline``: binned on the
server side, so neither option's data grows with the requests):

* ``uplot``: what ``faultload run --html`` writes (``store.html_trial.trial_page``): vendored uPlot and the
  binned series as JSON, drawn by the browser;
* ``mpl-svg`` / ``mpl-png``: the same page whose timeline is one matplotlib figure (a panel per chart,
  the faults shaded, the marks drawn) inlined as SVG, or as a base64 PNG (90 dpi), and no script.

Measured: the file's size; the build (spec, page, write; median of ``--repeat``; matplotlib's import,
once per process, apart); and headless Chromium opening the file (``--dump-dom``, the wall time of the
whole browser process, median of ``--browser-repeat``), and for uPlot the time its charts took in the
page (``data-charts-ms``, set by ``report.js``). With ``--screenshot PNG`` the 4,096 trial's uPlot page
is also photographed (docs/images/html-report.png).

Measured on 2026-12-04 (this 2-core machine, another benchmark running; the table, and why uPlot was
chosen, is in faultload/store/html.py's docstring): uPlot's page 84 KB (4,096) and 96 KB (131,072), built
in 4 and 40 ms; matplotlib's 174-225 KB, built in 750-815 ms after a 285-333 ms import; Chromium opens
any of them in 1.0-1.2 s (its own start), uPlot drawing its charts in 71-127 ms of that. uPlot: half the
size, 20-190 times faster to build, no optional extra, and charts that zoom and read out at a cursor.

Usage: .faultload/venv/bin/python bench/html_report.py [--repeat R] [--browser-repeat B] [--screenshot PNG]
"""

from __future__ import annotations

import argparse
import base64
import io
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from PIL import Image  # matplotlib's own dependency: the screenshot's colours reduced

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from faultload.checker.budgets import Budgets  # noqa: E402
from faultload.checker.judge import judge  # noqa: E402
from faultload.model.faults import FaultSchedule, parse_fault  # noqa: E402
from faultload.model.shape import LoadShape  # noqa: E402
from faultload.model.trial import TrialConfig  # noqa: E402
from faultload.record.collapse import CollapseVerdict  # noqa: E402
from faultload.record.faults import AppliedFault, FaultLog  # noqa: E402
from faultload.record.histogram import Histogram  # noqa: E402
from faultload.record.history import AttemptKind, ErrorClass, History, Outcome  # noqa: E402
from faultload.record.samples import SAMPLE_FIELDS, MonitorSamples, ProcessSnapshot  # noqa: E402
from faultload.record.trial import TrialResult, WorkerSummary  # noqa: E402
from faultload.store.html import write_page  # noqa: E402
from faultload.store.html_trial import trial_page  # noqa: E402
from faultload.store.plot import pyplot  # noqa: E402

RATE = 256.0  # requests per second: the default latency router's (256 at once, 1 s each)
SIZES = (4096, 131072)


def synthetic(requests: int, seed: int = 1) -> TrialResult:
    """A trial of ``requests`` as a run would record it, with one reset fault and a collapse inside it."""
    rng = np.random.default_rng(seed)
    load_s = requests / RATE
    fault_at, fault_s = 0.40 * load_s, 0.15 * load_s
    h = History.empty(requests)
    start = np.sort(rng.uniform(0.0, load_s, requests))
    hit = (start >= fault_at) & (start < fault_at + fault_s) & (rng.random(requests) < 0.3)
    retry_at = start + np.where(hit, rng.uniform(0.2, 1.0, requests), 0.0)  # the reset submit's retry
    e2e = rng.lognormal(0.0, 0.25, requests) * np.where(hit, 2.5, 1.0)
    h["nonce"][:] = np.arange(requests)
    h["server_id"][:] = np.arange(requests) + 1
    h["submit_start"][:] = start
    h["submit_end"][:] = retry_at + 0.004
    h["done"][:] = retry_at + e2e
    h["outcome"][:] = Outcome.OK
    lost = hit & (rng.random(requests) < 0.02)
    h["outcome"][lost] = Outcome.LOST
    h["error"][hit] = ErrorClass.RESET
    h["error"][lost] = ErrorClass.HTTP_404
    h["attempts"][:] = 2 + hit
    h["submit_retries"][:] = hit
    h["transport_errors"][:] = hit
    h.attempts = _attempts(h, hit, lost)
    fault = parse_fault(f"edge:reset_peer:timeout=0@{fault_at:.1f}+{fault_s:.1f}")
    record = AppliedFault(0, fault, fault_at, fault_at + fault_s, removed_by="schedule")
    e2e_hist, submit_hist = Histogram(), Histogram()
    e2e_hist.record_many(h["done"] - h["submit_start"])
    submit_hist.record_many(h["submit_end"] - h["submit_start"])
    return TrialResult(
        config=TrialConfig(
            target="skyrl==0.4.0", shape=LoadShape(requests=requests, workers=1), faults=FaultSchedule((fault,))
        ),
        history=h,
        workers=[
            WorkerSummary(
                0, submit_hist.to_state(), e2e_hist.to_state(), {"reset": "asample: ServerDisconnectedError"}, cpu_s=1.0
            )
        ],
        monitor=_monitor(h, float(np.nanmax(h["done"])) + 1.0, (fault_at, fault_at + fault_s), rng),
        router_stats={"received": requests, "completed": requests, "peak_in_flight": 256},
        server={"spec": "skyrl==0.4.0", "version": "0.4.0"},
        wall_s=load_s + 10.0,
        load_s=load_s,
        fault_log=FaultLog((record,)),
        start_epoch=0.0,
        verdict=CollapseVerdict(
            "event_loop_stall",
            fault_at + 0.3 * fault_s,
            ["/healthz unanswered for 2.0 s while requests were in flight"],
        ),
    )


def _attempts(h: History, hit: np.ndarray, lost: np.ndarray) -> dict[str, np.ndarray]:
    """Each request's submit (a reset one first for the fault's victims) and its one poll."""
    rows = np.arange(len(h))
    reset = rows[hit]
    parts = [  # (row, kind, start, end, status)
        (reset, AttemptKind.SUBMIT, h["submit_start"][hit], h["submit_start"][hit] + 0.002, -int(ErrorClass.RESET)),
        (rows, AttemptKind.SUBMIT, h["submit_end"] - 0.004, h["submit_end"], 200),
        (rows, AttemptKind.POLL, h["submit_end"], h["done"], np.where(lost, 404, 200)),
    ]
    return {
        "row": np.concatenate([p[0] for p in parts]).astype(np.int32),
        "kind": np.concatenate([np.full(p[0].size, p[1]) for p in parts]).astype(np.uint8),
        "start": np.concatenate([p[2] for p in parts]).astype(np.float32),
        "end": np.concatenate([p[3] for p in parts]).astype(np.float32),
        "status": np.concatenate([np.broadcast_to(p[4], p[0].shape) for p in parts]).astype(np.int16),
    }


def _monitor(h: History, end_s: float, fault: tuple[float, float], rng: np.random.Generator) -> MonitorSamples:
    t = np.arange(0.0, end_s, 0.5)
    in_flight = (np.searchsorted(np.sort(h["submit_start"]), t) - np.searchsorted(np.sort(h["done"]), t)).astype(float)
    samples = {name: np.full(t.size, -1.0) for name in SAMPLE_FIELDS}
    samples.update(
        t=t,
        router_in_flight=in_flight,
        client_in_flight=in_flight + 2,
        fds=40 + in_flight,
        rss=200e6 + 40e6 * t / end_s + 1e5 * in_flight,
        cpu_s=0.2 * t,
    )
    during = (t >= fault[0]) & (t < fault[1])
    healthz_ok = ~(during & (rng.random(t.size) < 0.2))
    latency = rng.uniform(0.001, 0.003, t.size) + np.where(during, 0.05, 0.0) + np.where(healthz_ok, 0.0, 1.0)
    return MonitorSamples(
        samples,
        t.copy(),
        latency,
        healthz_ok,
        ProcessSnapshot(200_000_000, 40, 0.0),
        ProcessSnapshot(240_000_000, 41, 0.2 * end_s),
        (1024, 4096),
    )


# --------------------------------------------------------------------------- matplotlib, the other option


def mpl_chart(fmt: str) -> Callable[[dict[str, Any]], str]:
    """The timeline spec drawn as one matplotlib figure, inlined as SVG or as a base64 PNG."""

    def draw(spec: dict[str, Any]) -> str:
        plt = pyplot()
        panels = spec["panels"]
        fig, axes = plt.subplots(len(panels), 1, figsize=(11, 1.9 * len(panels)), sharex=True, constrained_layout=True)
        for ax, panel in zip(axes, panels):
            _mpl_panel(ax, panel, spec)
        axes[-1].set_xlabel("trial time (s)")
        out = io.BytesIO() if fmt == "png" else io.StringIO()
        fig.savefig(out, format=fmt, dpi=90)
        plt.close(fig)
        if fmt == "svg":
            return '<div id="charts"><svg' + out.getvalue().split("<svg", 1)[1] + "</div>"  # past the XML prolog
        return f'<div id="charts"><img alt="timeline" src="data:image/png;base64,{base64.b64encode(out.getvalue()).decode()}"></div>'

    return draw


def _mpl_panel(ax, panel: dict[str, Any], spec: dict[str, Any]) -> None:
    x = np.asarray(panel["x"], dtype=float)
    for s in panel["series"]:
        y = np.asarray([np.nan if v is None else v for v in s["y"]], dtype=float)
        if s["kind"] == "step":
            ax.step(x, y, where="post", color=s["color"], label=s["label"], linewidth=1)
        elif s["kind"] == "points":
            ax.plot(x, y, ".", color=s["color"], label=s["label"], markersize=3)
        else:
            ax.plot(x, y, color=s["color"], label=s["label"], linewidth=1, linestyle="--" if s["dash"] else "-")
    if panel["log"] and np.isfinite(np.asarray(panel["series"][0]["y"], dtype=float)).any():
        ax.set_yscale("log")
    for w in spec["faults"]:
        ax.axvspan(w["start"], spec["end_s"] if w["end"] is None else w["end"], color=w["color"], alpha=0.14)
    for m in spec["marks"]:
        ax.axvline(m["t"], color="#d00", linewidth=1.5)
    ax.set_title(panel["title"], fontsize=9)
    ax.set_ylabel(panel["unit"], fontsize=8)
    ax.set_xlim(0, spec["end_s"])
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right", fontsize=7)


# --------------------------------------------------------------------------- measuring


def build_ms(result: TrialResult, verdicts, render, path: Path, repeat: int) -> tuple[list[float], int]:
    """Build times (ms) of the page written to ``path``, and its size."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        write_page(trial_page(result, verdicts, render), path)
        times.append((time.perf_counter() - started) * 1000)
    return times, path.stat().st_size


def chromium(path: Path, repeat: int, browser: str) -> tuple[list[float], list[float]]:
    """Wall seconds of headless Chromium dumping the rendered page, and the charts' ms in the page (uPlot)."""
    walls, in_page = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        out = subprocess.run(
            [
                browser,
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--window-size=1200,2000",
                "--dump-dom",
                path.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        walls.append(time.perf_counter() - started)
        found = re.search(r'data-charts-ms="([0-9.]+)"', out.stdout)
        if found:
            in_page.append(float(found.group(1)))
    return walls, in_page


def screenshot(path: Path, png: Path, browser: str) -> None:
    """The whole page, then reduced to 96 colours (Pillow, matplotlib's own dependency) to keep it small."""
    subprocess.run(
        [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--hide-scrollbars",
            "--window-size=1000,3250",
            f"--screenshot={png}",
            path.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    with Image.open(png) as image:
        image.convert("RGB").quantize(96, method=Image.Quantize.FASTOCTREE).save(png, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="builds per option and size (median)")
    parser.add_argument("--browser-repeat", type=int, default=3, help="Chromium runs per file (median)")
    parser.add_argument("--screenshot", default=None, metavar="PNG", help="photograph the 4,096 trial's uPlot page")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    started = time.perf_counter()
    pyplot()
    print(
        f"import matplotlib.pyplot: {(time.perf_counter() - started) * 1000:.0f} ms (once per process, not in the builds below)"
    )
    options = {"uplot": None, "mpl-svg": mpl_chart("svg"), "mpl-png": mpl_chart("png")}
    print(f"{'requests':>8}  {'option':<8} {'size KB':>8} {'build ms':>9} {'chromium s':>11} {'charts ms':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for requests in SIZES:
            result = synthetic(requests)
            verdicts = judge(result, Budgets())
            for name, render in options.items():
                path = Path(tmp) / f"{name}-{requests}.html"
                builds, size = build_ms(result, verdicts, render, path, args.repeat)
                walls, in_page = chromium(path, args.browser_repeat, browser) if browser else ([], [])
                wall = f"{statistics.median(walls):.2f}" if walls else "-"
                charts = f"{statistics.median(in_page):.1f}" if in_page else "-"
                print(
                    f"{requests:>8}  {name:<8} {size / 1000:>8.0f} {statistics.median(builds):>9.1f} {wall:>11} {charts:>10}"
                )
                if args.screenshot and name == "uplot" and requests == SIZES[0] and browser:
                    screenshot(path, Path(args.screenshot), browser)
    if not browser:
        print("chromium not found (apt-get install -y chromium): nothing rendered")


if __name__ == "__main__":
    main()
