"""What a trial's verdicts count for the property that ran it: the violations that fail it, the line it fails
with, the tally of what it judged, and why a property that passed proves nothing.

Pure functions of a property's state, the property and an outcome, apart from the runner
(:mod:`faultload.suite.runner`), which keeps the time bounds, the cache and the shrink around them.
"""

from __future__ import annotations

from faultload.model.switches import switches_text
from faultload.suite.executor import TrialOutcome
from faultload.suite.properties import Property, checked
from faultload.suite.state import PropertyState, Tally


def failing(prop: Property, outcome: TrialOutcome) -> list:
    """Every invariant the trial violated, the property's own first: a violation seen is a violation failed,
    whichever property's trial saw it (what a property asserts only steers what is drawn and targeted)."""
    names = checked(prop)
    violated = [v for v in outcome.verdicts if v.ok is False]
    return sorted(violated, key=lambda v: v.name not in names)


def violation_message(prop: Property, config, violations: list) -> str:
    """The property's failure: the trial's size and build, then one line per violated invariant, each with its
    figure and budget (an invariant the property does not assert is marked as seen by this trial only)."""
    names = checked(prop)
    lines = [
        f"{v.name} violated{'' if v.name in names else ' (seen by this trial, not asserted by its property)'}: "
        f"figure {v.figure} vs budget {v.budget}: {v.detail}"
        for v in violations
    ]
    return (
        f"{len(violations)} invariant(s) violated by a {config.shape.requests}-request trial "
        f"(target {config.target}{switches_text(config.regress, config.fixes)}, "
        f"time scale {config.shape.time_scale:g}):\n  " + "\n  ".join(lines)
    )


def tally(state: PropertyState, prop: Property, key: str, outcome: TrialOutcome | None) -> None:
    """Count one example per invariant: judged, unknown, or skipped (``outcome`` None: not run).

    A trial is counted once per property, however often Hypothesis replays it.
    """
    names = checked(prop)
    if outcome is not None:
        if key in state.counted:
            return
        state.counted.add(key)
    by_name = {v.name: v for v in outcome.verdicts} if outcome is not None else {}
    judged_any = False
    for name in names:
        count = state.tally.setdefault(name, Tally())
        if outcome is None:
            count.skipped += 1
        elif name in by_name and by_name[name].ok is not None:
            count.judged += 1
            judged_any = True
        else:
            count.unknown += 1
    if judged_any:
        state.judged_trials += 1


def not_judged_reason(state: PropertyState | None) -> str | None:
    """Why a property that passed proves nothing (no example judged any of its invariants), or None: a green
    property has judged something (a broken or failing one is reported as such, not as this)."""
    if state is None or state.broken or state.refused or state.shrinking:
        return None
    names = checked(state.prop)
    unknown = sum(t.unknown for t in state.tally.values())
    if unknown and state.prop is not None and state.prop.comparative:  # a comparison is judged or not ok
        return f"not judged: {unknown} examples left {', '.join(names)} unknown (a metric not measured)"
    if state.judged_trials:
        return None
    reasons = []
    if state.not_run:
        reasons.append(f"{state.not_run} examples not run (time bound spent)")
    if unknown:
        reasons.append(f"{state.trials + state.cached} examples left every invariant unknown")
    return f"not judged: no example judged any of {', '.join(names)}" + (
        f" ({'; '.join(reasons)})" if reasons else " (no example ran)"
    )
