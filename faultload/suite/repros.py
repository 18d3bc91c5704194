"""A failing property's repro: the smallest failing trial as JSON, with its report, bundle, page and PNG beside it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultload.compare.report import markdown_table
from faultload.store import report as report_mod
from faultload.store.bundle import write_bundle
from faultload.store.html_trial import write_trial_html
from faultload.store.plot import write_timeline
from faultload.store.repro import COMPARE_REPRO_VERSION, build_repro, config_key, replay_command, write_repro
from faultload.suite.state import PropertyState


def write_property_repro(
    state: PropertyState,
    profile: str,
    workspace,
    budgets,
    hypothesis_seed: Any = None,
    comparison: Mapping[str, Any] | None = None,
) -> Path | None:
    """Write the property's smallest failing trial (its last failure) as a repro, with report, bundle, page and PNG.

    The bundle (``STEM.bundle/``, ``faultload check`` judges it again offline)
    is named in the repro's ``bundle`` and ``check`` keys and in the session's
    summary lines, under the repro; the trial's HTML report (``STEM.html``)
    in its ``html`` key. ``comparison``: a comparative example's
    repro keys (both builds, repeats, thresholds, the comparison as found:
    ``ComparingExecutor.repro_fields``), with its Markdown table beside it.
    """
    if state.best is None:
        return None
    config, outcome = state.best
    found_by = _found_by(state, profile, hypothesis_seed)
    stem = f"{_slug(state.nodeid)}-{time.strftime('%Y%m%dT%H%M%S')}-{config_key(config)}"
    directory = workspace.repros
    # judged on every invariant, as the session was: a violation of any of them fails the replay too
    repro = build_repro(config, outcome.verdicts, outcome.figures, budgets, found_by=found_by)
    if comparison is not None:
        repro.update(comparison, repro_version=COMPARE_REPRO_VERSION)
        directory.mkdir(parents=True, exist_ok=True)
        table = directory / f"{stem}.compare.md"
        table.write_text(markdown_table(comparison["compare"]["result"]))
        repro["compare_table"] = str(table)
    if outcome.result is not None:
        report = report_mod.build_report(outcome.result, outcome.verdicts)
        report_path = directory / f"{stem}.report.json"
        directory.mkdir(parents=True, exist_ok=True)
        report_mod.write_json(report, report_path)
        repro["report"] = str(report_path)
        state.bundle_path = write_bundle(outcome.result, budgets, outcome.verdicts, directory / f"{stem}.bundle")
        repro["bundle"] = str(state.bundle_path)
        repro["check"] = f"faultload check {state.bundle_path}"
        state.html_path = write_trial_html(outcome.result, outcome.verdicts, directory / f"{stem}.html")
        repro["html"] = str(state.html_path)
        try:
            repro["plot"] = str(
                write_timeline(
                    outcome.result, directory / f"{stem}.png", title=f"{state.nodeid}: {config.shape.requests} requests"
                )
            )
        except Exception as exc:  # noqa: BLE001 - matplotlib missing or a plotting bug: the repro still counts
            repro["plot_error"] = f"{type(exc).__name__}: {exc}"
    path = write_repro(repro, directory, stem)
    state.repro_path = path
    repro["replay"] = replay_command(path)
    write_repro(repro, directory, stem)
    return path


def _found_by(state: PropertyState, profile: str, hypothesis_seed: Any) -> dict[str, Any]:
    """How the repro was found: the property, the profile and seed, and how far its shrink got from the first
    failure (each greedy reduction tried, and whether the shrink's budget cut it)."""
    config = state.best[0]
    return {
        "property": state.nodeid,
        "profile": profile,
        "hypothesis_seed": hypothesis_seed,
        "shrink": {
            "from_requests": state.first_failure_requests,
            "to_requests": config.shape.requests,
            "failing_examples": state.failures,
            "shrink_s": round(state.shrink_seconds, 1),
            "cut_by_budget": state.shrink_cut,
            "budget_s": round((state.shrink_until or 0) - (state.first_failure_at or 0), 1),
            "reduce_steps": state.reduce_log,
            "hypothesis_final_requests": state.last_failure[0].shape.requests if state.last_failure else None,
        },
        "trials_run": state.trials,
    }


def _slug(nodeid: str) -> str:
    name = nodeid.split("::")[-1]
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:60]
