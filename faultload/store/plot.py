"""A trial's timeline as one PNG: what a person reads first.

Five panels over trial time, fault windows shaded in each: completions per
second (client), requests in flight at the router, server open fds (with its
limit), server RSS, /healthz latency (failed probes marked). Built from the
monitor's samples and the history; matplotlib with the Agg backend, so it
needs no display.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from faultload.record.history import Outcome
from faultload.record.trial import TrialResult

_FAULT_COLOURS = {"edge": "tab:red", "backend": "tab:orange", "router": "tab:purple"}


def completions_per_s(result: TrialResult, bin_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(bin starts, completed results per second) over the trial's load, from the history alone."""
    done = result.history["done"]
    ok = result.history["outcome"] == Outcome.OK
    times = done[ok & np.isfinite(done)]
    end = max(result.load_s, float(times.max()) if times.size else 0.0, bin_s)
    edges = np.arange(0.0, end + bin_s, bin_s)
    counts, _ = np.histogram(times, bins=edges)
    return edges[:-1], counts / bin_s


def fds_peak(samples: dict[str, np.ndarray]) -> float:
    fds = samples["fds"]
    return float(fds.max()) if fds.size else 0.0


class PlotUnavailable(ImportError):
    """matplotlib cannot be imported (the optional ``faultload[plot]`` extra): the plot is skipped."""


def pyplot():
    """pyplot on the Agg backend (files only, no display).

    Imported here, when a plot is drawn: matplotlib is an optional extra, and at
    ~200 ms (pyplot, measured) it would otherwise slow every run that draws none.
    """
    try:
        import matplotlib.pyplot as plt  # local import: optional extra, heavy, only when a plot is drawn
    except ImportError as exc:
        raise PlotUnavailable(f"matplotlib cannot be imported ({exc}); pip install 'faultload[plot]'") from None
    plt.switch_backend("Agg")
    return plt


def _draw_training(axes, training, mon, bin_s: float, t_bins: np.ndarray) -> None:
    """The training path beside sampling's: its calls completed per second, the engine's fds and both CPUs."""
    done = training["done"][
        np.isin(training["op"], (1, 2)) & np.isfinite(training["done"])
    ]  # forward_backward, optim_step
    edges = np.append(t_bins, t_bins[-1] + bin_s) if t_bins.size else np.array([0.0, bin_s])
    counts, _ = np.histogram(done, bins=edges)
    axes[0].step(edges[:-1], counts / bin_s, where="post", color="tab:purple", label="training calls")
    axes[0].legend(loc="upper right", fontsize=8)
    axes[5].set_ylabel("CPU (cores)")
    if mon is None or "engine_fds" not in mon.samples:
        return
    s = mon.samples
    valid = s["engine_fds"] >= 0
    axes[2].plot(s["t"][valid], s["engine_fds"][valid], color="tab:purple", label="engine fds")
    axes[2].legend(loc="upper left", fontsize=8)
    for name, colour, label in (("cpu_s", "tab:brown", "server"), ("engine_cpu_s", "tab:purple", "engine")):
        ok = s[name] >= 0
        t, cpu = s["t"][ok], s[name][ok]
        if t.size >= 2:
            axes[5].plot(t[1:], np.diff(cpu) / np.maximum(np.diff(t), 1e-6), color=colour, label=label)
    axes[5].legend(loc="upper right", fontsize=8)


def _draw_server(axes, mon) -> None:
    """The monitor's panels: requests in flight at the router and the client, the server's fds (with its soft
    limit once they near it), its RSS, and /healthz latency with the failed probes marked."""
    s = mon.samples
    t = s["t"]
    valid = s["router_in_flight"] >= 0
    axes[1].plot(t[valid], s["router_in_flight"][valid], label="router in flight", color="tab:blue")
    valid = s["client_in_flight"] >= 0
    axes[1].plot(t[valid], s["client_in_flight"][valid], label="client outstanding", color="tab:gray", alpha=0.7)
    axes[1].legend(loc="upper right", fontsize=8)
    valid = s["fds"] >= 0
    axes[2].plot(t[valid], s["fds"][valid], color="tab:brown")
    if mon.fd_limit and fds_peak(s) > 0.25 * mon.fd_limit[0]:
        axes[2].axhline(
            mon.fd_limit[0], color="black", linestyle="--", linewidth=0.8, label=f"soft limit {mon.fd_limit[0]}"
        )
        axes[2].legend(loc="upper right", fontsize=8)
    valid = s["rss"] >= 0
    axes[3].plot(t[valid], s["rss"][valid] / 2**20, color="tab:cyan")
    ok = mon.healthz_ok
    axes[4].plot(mon.healthz_t[ok], mon.healthz_latency_s[ok] * 1000, ".", markersize=3, color="tab:olive", label="ok")
    if (~ok).any():
        axes[4].plot(mon.healthz_t[~ok], mon.healthz_latency_s[~ok] * 1000, "x", color="tab:red", label="failed")
    axes[4].legend(loc="upper right", fontsize=8)


def _mark_faults_and_collapse(axes, result: TrialResult) -> None:
    """Each applied fault's window shaded in every panel and named in the first; the collapse, when the watchdog
    saw one, as a red line across them all."""
    if result.fault_log is not None:
        for record in result.fault_log.records:
            if record.applied_at_s is None:
                continue
            end = record.removed_at_s if record.removed_at_s is not None else result.load_s
            colour = _FAULT_COLOURS.get(record.fault.link, "tab:red")
            for ax in axes:
                ax.axvspan(record.applied_at_s, end, color=colour, alpha=0.12)
            axes[0].text(
                record.applied_at_s, 0, record.fault.to_spec(), fontsize=7, rotation=90, va="bottom", color=colour
            )
    if result.verdict is not None:
        for ax in axes:
            ax.axvline(result.verdict.at_s, color="red", linewidth=1.0)


def write_timeline(result: TrialResult, path: str | Path, title: str | None = None) -> Path:
    """Draw ``result``'s timeline to ``path`` (PNG) and return the path; PlotUnavailable without matplotlib."""
    plt = pyplot()

    path = Path(path)
    mon = result.monitor
    training = result.training
    panels = 6 if training is not None else 5
    fig, axes = plt.subplots(panels, 1, figsize=(11, 12 + 2 * (panels - 5)), sharex=True, constrained_layout=True)
    bin_s = max(0.5, result.load_s / 200) if result.load_s else 1.0
    t_bins, rate = completions_per_s(result, bin_s)
    axes[0].step(t_bins, rate, where="post", color="tab:green", label="samples")
    axes[0].set_ylabel("completions/s")
    if training is not None:
        _draw_training(axes, training, mon, bin_s, t_bins)
    if mon is not None and mon.samples["t"].size:
        _draw_server(axes, mon)
    axes[1].set_ylabel("in flight")
    axes[2].set_ylabel("server fds")
    axes[3].set_ylabel("server RSS (MiB)")
    axes[4].set_ylabel("/healthz (ms)")
    axes[-1].set_xlabel("trial time (s)")
    _mark_faults_and_collapse(axes, result)
    cfg = result.config
    fig.suptitle(title or f"{cfg.target}: {cfg.shape.requests} requests, {cfg.router.mode} router", fontsize=11)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
