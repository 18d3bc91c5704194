"""The session's results as data (``--faultload-summary-json``) and as the terminal summary's lines."""

from __future__ import annotations

import json
import time
from typing import Any

from faultload.model.switches import switches_text
from faultload.store.html_suite import write_suite_html
from faultload.store.report_text import phases_text, phases_wall
from faultload.store.repro import config_key
from faultload.store.summary_markdown import summary_markdown
from faultload.suite.gate import gate_lines
from faultload.suite.options import ReportFiles
from faultload.suite.properties import checked
from faultload.suite.state import Tally, tallies_dict, tally_text


def summary_dict(runner, outcomes: dict[str, str] | None = None) -> dict[str, Any]:
    """The session as data (``--faultload-summary-json``; what ``faultload matrix`` reads).

    ``outcomes``: pytest's outcome per property nodeid (passed, failed, skipped, error).
    ``invariants`` (per property and for the session): how many examples
    judged each invariant, left it unknown, or were skipped by a time bound.
    ``phases_s``: every trial run's phases summed (``stack_ready``, the
    trial's own, ``judge``); ``trial_wall_s`` the trials' walls summed and
    ``load_share`` the load's share of them (None before a trial ran).
    Per property, its shrink as its repro's ``found_by.shrink`` keeps it
    (``failing_examples``, ``shrink_cut``, ``reduce_steps``) and its repro's
    files (``repro_path``, ``bundle_path``, ``html_path``: the trial's page):
    what ``--faultload-html`` shows. Keys are only ever added.
    """
    outcomes = outcomes or {}
    properties = [
        property_dict(runner, state, outcomes.get(state.nodeid, "unknown")) for state in runner.states.values()
    ]
    return {
        "profile": runner.profile.name,
        "target": runner.target,
        "regress": list(runner.regress),
        "fixes": list(runner.fixes),
        "baseline": runner.baseline.text if runner.baseline is not None else None,
        "base": getattr(runner, "base", None),  # the pull-request gate's base (suite.gate), None: absolute
        "trials": runner.trials,
        "wall_s": round(time.monotonic() - runner.session_started, 1),
        "stack_starts": runner.stack_starts,
        "judged_trials": sum(p["judged_trials"] for p in properties),
        **phases_dict(runner.phases_s),
        "invariants": tallies_dict(session_tally(runner.states.values())),
        "properties": properties,
        "session_growth": session_growth_dict(runner),
        "notes": list(getattr(runner, "notes", [])),  # what the session decided on its own, said once
    }


def property_dict(runner, state, outcome: str) -> dict[str, Any]:
    """One property of the summary: pytest's ``outcome``, what it violated and by how much, its tallies, its shrink
    and its repro's files."""
    violated, evidence = _violations(runner, state)
    return {
        "nodeid": state.nodeid,
        "name": state.nodeid.split("::")[-1],
        "comparative": bool(state.prop is not None and state.prop.comparative),  # each example on two builds
        "outcome": outcome,
        "violated": violated,
        # each violated invariant's detail in the smallest failing trial: the figure that failed, so a
        # matrix line (and CI's output) says by how much without the row's log
        "evidence": evidence,
        "trials": state.trials,
        "cached": state.cached,
        "not_run": state.not_run,
        "judged_trials": state.judged_trials,
        "invariants": tallies_dict(state.tally),
        "first_failure_requests": state.first_failure_requests,
        "repro_requests": state.best[0].shape.requests if state.best else None,
        # the repro's trainers' forward_backward + optim_step (0 without training)
        "repro_training_calls": state.best[0].shape.training.calls if state.best else None,
        "repro_path": str(state.repro_path) if state.repro_path else None,
        "bundle_path": str(state.bundle_path) if state.bundle_path else None,
        "shrink_s": round(state.shrink_seconds, 1) if state.shrinking else None,
        # the shrink: failing examples met, whether its budget cut it, each reduction tried (as the repro's
        # found_by.shrink keeps them); the repro's trial page
        "failing_examples": state.failures,
        "shrink_cut": state.shrink_cut,
        "reduce_steps": list(state.reduce_log),
        "html_path": str(state.html_path) if state.html_path else None,
        "error": state.broken or _property_not_judged(runner, state.nodeid),
        "refused": state.refused,
        "unjudged": list(state.unjudged),
        # with a base: examples on both builds and, per class (new, known, fixed), each invariant's examples
        "gate": state.gate.to_dict() if getattr(runner, "base", None) else None,
    }


def _violations(runner, state) -> tuple[list[str], dict[str, str]]:
    """The invariants the property's smallest failing trial violated, the property's own first, each with its detail;
    then the session's growth when it was charged to this property (its last)."""
    violated: list[str] = []
    evidence: dict[str, str] = {}
    if state.best is not None:
        names = checked(state.prop)
        known = state.known_in_failure.get(config_key(state.best[0]), ())  # the base showed them too: not failed
        violations = sorted(
            (v for v in state.best[1].verdicts if v.ok is False and v.name not in known),
            key=lambda v: v.name not in names,
        )
        evidence = {v.name: v.detail for v in violations}  # every violation fails, the property's own first
        violated = list(evidence)
    session = getattr(runner, "session_failure", lambda nodeid: None)(state.nodeid)
    if session:  # the session's server grew with its work: charged to its last property
        evidence[runner.session_growth.name] = runner.session_growth.detail
        violated.append(runner.session_growth.name)
    return violated, evidence


def _property_not_judged(runner, nodeid: str) -> str | None:
    """Why a property proves nothing (the session's growth is reported as a violation, not as this)."""
    judged = getattr(runner, "property_not_judged", None) or runner.not_judged
    return judged(nodeid)


def session_growth_dict(runner) -> dict[str, Any] | None:
    """``session_growth``'s verdict and the trial starts it read (None before the last property ended)."""
    verdict = getattr(runner, "session_growth", None)
    if verdict is None:
        return None
    starts = getattr(runner.executor, "trial_starts", [])
    return {**verdict.to_dict(), "trial_starts": [start.to_dict() for start in starts]}


def phases_dict(phases: dict[str, float]) -> dict[str, Any]:
    """The summary's ``phases_s``, ``trial_wall_s`` and ``load_share`` from the session's summed phases."""
    wall = phases_wall(phases)
    return {
        "phases_s": {name: round(seconds, 3) for name, seconds in phases.items()},
        "trial_wall_s": round(wall, 3),
        "load_share": phases.get("load", 0.0) / wall if wall > 0 else None,
    }


def session_tally(states) -> dict[str, Tally]:
    """Every property's tallies summed per invariant."""
    total: dict[str, Tally] = {}
    for state in states:
        for name, tally in state.tally.items():
            total.setdefault(name, Tally()).add(tally)
    return total


def summary_lines(runner) -> list[str]:
    """The session's lines for the terminal summary: one per property, its repro and replay command."""
    lines = [
        f"profile {runner.profile.name}: target {runner.target}"
        + switches_text(runner.regress, runner.fixes)
        + f", time scale {runner.profile.time_scale:g}; {runner.trials} trials in "
        f"{time.monotonic() - runner.session_started:.0f}s; {runner.executor.describe()}"
        + (f"; compared with {runner.baseline.text}: {runner.comparing.describe()}" if runner.comparing else "")
    ] + [f"  {note}" for note in runner.notes]
    for state in runner.states.values():
        name = state.nodeid.split("::")[-1]
        text = f"  {name}: {state.trials} trials, {state.cached} cached, {state.judged_trials} judged"
        if state.not_run:
            text += f", {state.not_run} examples not run (time bound spent)"
        if state.shrinking:
            shrink_s = state.shrink_seconds
            final = state.best[0].shape.requests if state.best else None
            text += (
                f"; FAILED, shrunk from {state.first_failure_requests} to {final} requests "
                f"in {shrink_s:.0f}s over {state.failures} failing examples"
                + (" (cut by the shrink budget)" if state.shrink_cut else "")
            )
        if state.repro_path:
            text += f"\n    repro: {state.repro_path}\n    replay: faultload replay {state.repro_path}"
        if state.bundle_path:
            text += f"\n    bundle: {state.bundle_path}\n    check: faultload check {state.bundle_path}"
        if state.unjudged:
            text += f"; {len(state.unjudged)} trial(s) not judged: {state.unjudged[0]}"
        text += "".join(f"\n{line}" for line in gate_lines(state.gate))
        if state.broken:
            text += f"; ERROR {state.broken}"
        elif state.refused:
            text += f"; FAILED {state.refused}"
        elif runner.not_judged(state.nodeid):
            text += f"; FAILED {runner.not_judged(state.nodeid)}"
        lines.append(text)
    verdict = getattr(runner, "session_growth", None)
    if verdict is not None:
        state = {True: "ok", False: "FAILED", None: "unknown"}[verdict.ok]
        lines.append(f"  session: {verdict.name} {state}: {verdict.detail}")
    total = session_tally(runner.states.values())
    if total:
        lines.append("  " + tally_text(total))
    if runner.phases_s:
        lines.append(f"  trial wall {phases_wall(runner.phases_s):.0f} s: {phases_text(runner.phases_s)}")
    return lines


def write_summary(data: dict[str, Any], files: ReportFiles) -> None:
    """A session's summary as JSON (``--faultload-summary-json``), as a page (``--faultload-html``) and as
    Markdown (``--faultload-markdown``)."""
    if files.summary_json is not None:
        files.summary_json.parent.mkdir(parents=True, exist_ok=True)
        files.summary_json.write_text(json.dumps(data, indent=2) + "\n")
    if files.html is not None:
        write_suite_html(data, files.html)
    if files.markdown is not None:
        files.markdown.parent.mkdir(parents=True, exist_ok=True)
        files.markdown.write_text(summary_markdown(data))
