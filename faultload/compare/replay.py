"""``faultload replay`` of a comparative repro (the suite's ``--faultload-baseline`` property): both builds again.

The repro's trial runs on its baseline and its candidate as many times each
as when it was found, in ABBA order, each trial on a fresh stack
(:func:`faultload.compare.runner.run_comparison`, what ``faultload compare``
runs), judged by the thresholds stored in the repro (not today's settings
file: a replay asks whether *that* failure reproduces). Exit 1 when a metric
is still worse or went unmeasured (unknown is never ok), or a trial of either
build violated an invariant (the suite failed the example on it as on a worse
metric); 0 when the candidate is no worse now and every trial held (reported
as not reproduced).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from faultload.compare.html import write_compare_html
from faultload.compare.judge import CompareSettings, comparison_json
from faultload.compare.report import markdown_table
from faultload.compare.runner import abba, judge_trials, run_comparison
from faultload.host.lanes import COMPARISON_WAIT_S, admission_for
from faultload.model.build import Build, parse_build
from faultload.store.outcomes import ReplayStatus


def compare_spec(path: Path | str, data: Mapping[str, Any]) -> tuple[Build, int, CompareSettings]:
    """(the baseline build, the repeats per build, the thresholds) of a comparative repro; ValueError naming
    what is wrong."""
    spec = data["compare"]
    baseline = parse_build(str(data.get("baseline") or ""), f"{path} baseline")
    repeats = spec.get("repeats")
    if not isinstance(repeats, int) or isinstance(repeats, bool):
        raise ValueError(f"{path} compare.repeats: {repeats!r} is not a whole number")
    abba(repeats)
    stored = spec.get("settings")
    if not isinstance(stored, Mapping):
        raise ValueError(f"{path} compare.settings: missing (the thresholds the repro was judged by)")
    try:
        settings = CompareSettings(**stored)
        settings.validate()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path} compare.settings: {exc}") from None
    return baseline, repeats, settings


def trials_violated(result: Mapping[str, Any]) -> list[str]:
    """The invariants any trial of a ``faultload.compare/1`` result violated (its ``trials``' ``violated``)."""
    return sorted({name for trial in result.get("trials") or () for name in trial.get("violated") or ()})


def replay_comparison(
    path: Path | str,
    data: Mapping[str, Any],
    config,
    budgets,
    workspace,
    json_out: str | None = None,
    out: TextIO | None = None,
    html: str | None = None,
) -> ReplayStatus:
    """Run a comparative repro's trial on both builds again: REPRODUCED while the candidate is still worse
    (or a metric went unmeasured: unknown is not a pass) or a trial violated an invariant, NOT_REPRODUCED once not."""
    baseline, repeats, settings = compare_spec(path, data)
    builds = {"baseline": baseline, "candidate": Build(config.target, tuple(config.regress), tuple(config.fixes))}
    found = data["compare"].get("result") or {}
    was, was_violated = found.get("worse") or [], trials_violated(found)

    def say(message: str) -> None:
        print(message, file=out, flush=True)

    say(
        f"replaying {path}: {config.shape.requests} requests, {builds['candidate'].text} against "
        f"{baseline.text}, {repeats} trials each (ABBA), time scale {config.shape.time_scale:g}; "
        f"originally worse: {', '.join(was) or 'nothing'}"
        + (f", violated in a trial: {', '.join(was_violated)}" if was_violated else "")
    )
    turns = admission_for(workspace.root, COMPARISON_WAIT_S, 1)  # each trial alone on the machine
    trials = run_comparison(config, builds, repeats, workspace, budgets, lambda m: say(f"  {m}"), admission=turns)
    result = judge_trials(builds, trials, settings)  # an interrupted trial raised KeyboardInterrupt (exit 130)
    say(markdown_table(result))
    violated = trials_violated(result)
    if result["worse"] or violated:
        status = "reproduced"
        parts = ([f"still worse: {', '.join(result['worse'])}"] if result["worse"] else []) + (
            [f"violated in a trial: {', '.join(violated)}"] if violated else []
        )
        say("reproduced: " + "; ".join(parts))
    elif result["unknown"]:
        status = "not judged"
        say(f"not judged: not measured: {', '.join(result['unknown'])} (unknown is not a pass)")
    else:
        status = ReplayStatus.NOT_REPRODUCED.value
        say(f"{status}: {builds['candidate'].text} is no worse than {baseline.text} now")
    if json_out:
        replayed = {
            **result,
            "replay": {
                "repro": str(path),
                "status": status,
                "originally_worse": list(was),
                "originally_violated": was_violated,
            },
        }
        Path(json_out).write_text(comparison_json(replayed))
    if html:
        write_compare_html(result, trials, html)
    return ReplayStatus.NOT_REPRODUCED if status == ReplayStatus.NOT_REPRODUCED.value else ReplayStatus.REPRODUCED
