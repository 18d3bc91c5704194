"""``faultload check BUNDLE``: judge a stored trial again, offline, and print its verdicts as the run did.

The analysis half of Jepsen's store/analyze split. With no ``--budget`` the
verdicts must equal the ones stored with the bundle (the checker is a pure
function of what was recorded); a difference is a bug in faultload and is
said in the output. With ``--budget NAME=VALUE`` the stored budgets are
overridden key by key, and the output says which verdicts changed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence, TextIO

from faultload.checker.budgets import apply_overrides
from faultload.checker.compose import to_report
from faultload.checker.judge import judge
from faultload.model.switches import switches_text
from faultload.store.bundle import StoredTrial, load_bundle
from faultload.store.report_text import verdict_lines

MARKS = {True: "ok", False: "VIOLATED", None: "unknown"}


def check_bundle(
    directory: str | Path, overrides: Sequence[str] = (), json_out: str | None = None, out: TextIO | None = None
) -> int:
    """Re-judge the bundle in ``directory``; True when a verdict is violated.

    ValueError (one line) for a directory that is not a bundle or a bad override.
    """
    out = out or sys.stdout  # read at call time: a caller (or a test) may have replaced it
    stored = load_bundle(directory)
    budgets = apply_overrides(stored.budgets, overrides)
    now = to_report(judge(stored, budgets))
    before = to_report(stored.verdicts)
    print(_header(directory, stored, overrides), file=out)
    print("\n".join(verdict_lines(now, stored.verdict.to_dict() if stored.verdict else None)), file=out)
    changed = _changes(before, now)
    print(_comparison(changed, overrides), file=out)
    if json_out:
        data = {
            "bundle": str(directory),
            "budgets": budgets.to_dict(),
            "overrides": list(overrides),
            "invariants": now,
            "stored_invariants": before,
            "changed": [c["name"] for c in changed],
            "verdict": stored.verdict.to_dict() if stored.verdict else None,
            "versions": stored.versions,
        }
        Path(json_out).write_text(json.dumps(data, indent=2, default=str) + "\n")
    return any(v["ok"] is False for v in now)


def _header(directory: str | Path, stored: StoredTrial, overrides: Sequence[str]) -> str:
    config, versions = stored.config, stored.versions
    budgets = "the stored budgets" + (f" with {', '.join(overrides)}" if overrides else "")
    return (
        f"bundle {directory}: target {config.target} (version {versions.get('target_version')})"
        + switches_text(config.regress, config.fixes)
        + f", {config.shape.requests} requests, written by faultload {versions.get('faultload')}; "
        f"judged again with {budgets}"
    )


# What a verdict says: its outcome, figure, budget and detail line. How the line is split into head and notes is
# how it is kept (a bundle written before notes were kept stores the whole line as its head), not what it says.
JUDGED = ("name", "ok", "figure", "budget", "detail")


def _said(verdict: dict[str, Any] | None) -> tuple[Any, ...] | None:
    return None if verdict is None else tuple(verdict.get(key) for key in JUDGED)


def _changes(before: Iterable[dict[str, Any]], now: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The verdicts of ``now`` that say anything else than ``before`` did, each with its old ``ok``."""
    old = {v["name"]: v for v in before}
    return [
        {**v, "was": old[v["name"]]["ok"] if v["name"] in old else "absent"}
        for v in now
        if _said(old.get(v["name"])) != _said(v)
    ]


def _comparison(changed: list[dict[str, Any]], overrides: Sequence[str]) -> str:
    names = ", ".join(f"{c['name']} ({MARKS.get(c['was'], c['was'])} -> {MARKS[c['ok']]})" for c in changed)
    if overrides:
        return f"changed by the budgets: {names}" if changed else "no verdict changed with these budgets"
    if changed:
        return f"DIFFERS from the stored verdicts, a faultload bug (same record, same budgets): {names}"
    return "same verdicts as stored"
