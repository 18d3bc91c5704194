"""Repro files: a failing trial as JSON, and ``faultload replay FILE`` to run it again.

A repro file holds everything a trial is made of — the shrunk ``TrialConfig``
(shape + faults + router + target + regressions + time scale), its seed, the
budgets it was judged against — plus what failed (the invariants' verdicts
and figures, or ``refused``: the server failed before any load, a session no
SDK can read) and how it was found (property, Hypothesis profile, how far the
shrinker got). ``faultload replay`` runs the config on a fresh stack, judges it
against the same budgets and exits 1 when the failure reproduces, 0 when it
does not (reported as *not reproduced*, with both runs' figures). The file itself is
never rewritten by a replay: it keeps the original figures.

A comparative repro (``repro_version`` 2, from ``--faultload-baseline``) also
names both builds (``baseline``, ``candidate``) and holds ``compare``: the
repeats per build, the thresholds and the comparison as found. Its replay
runs the trial on both builds again (:mod:`faultload.compare.replay`). A
version-1 repro is read and replayed as ever; an older faultload refuses a
version-2 one rather than replay only its candidate.

The config's JSON form is :mod:`faultload.model.codec`'s.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from faultload.checker.budgets import Budgets
from faultload.checker.judge import judge
from faultload.client.session import SessionUnreadable
from faultload.compare.replay import replay_comparison
from faultload.model.codec import config_from_dict, config_to_dict
from faultload.model.switches import switches_text
from faultload.run.trial import run_trial
from faultload.store import report as report_mod
from faultload.store.html_trial import write_trial_html
from faultload.store.outcomes import ReplayStatus

REPRO_VERSION = 1
COMPARE_REPRO_VERSION = 2  # a comparative repro: version 1's keys plus baseline, candidate and compare


def config_key(config) -> str:
    """A stable short hash of a config (names repro files, keys caches)."""
    text = json.dumps(config_to_dict(config), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- the repro file


# Older names of three verdict figures, kept as keys of ``figures`` (repro files, the
# suite's target labels and replay's comparison read them): the same numbers, not recomputed.
FIGURE_ALIASES = {
    "fds_per_in_flight": "bounded_fds",
    "rss_growth_mib": "bounded_rss",
    "healthz_p99_s": "healthz_latency",
}


def figures_of(verdicts) -> dict[str, Any]:
    """The numbers a reader compares between runs: each verdict's ``{ok, figure, budget}``.

    One definition per figure: each is the number its invariant judged, and
    the aliases in :data:`FIGURE_ALIASES` (fds per request in flight, RSS
    growth in MiB, /healthz p99) copy their verdict's figure, present when it
    was measured.
    """
    figures: dict[str, Any] = {}
    for v in verdicts:
        d = v.to_dict()
        figures[v.name] = {"ok": d["ok"], "figure": d["figure"], "budget": d["budget"]}
    for alias, name in FIGURE_ALIASES.items():
        figure = figures.get(name, {}).get("figure")
        if figure is not None:
            figures[alias] = figure
    return figures


def build_repro(
    config,
    verdicts,
    figures: Mapping[str, Any],
    budgets: Budgets,
    *,
    checked: tuple[str, ...] = (),
    found_by: Mapping[str, Any] | None = None,
    refused: str | None = None,
) -> dict[str, Any]:
    """The repro file's data; ``refused``: the server failed before any load (no verdicts, that line instead)."""
    failing = [v.to_dict() for v in verdicts if v.ok is False]
    return {
        "repro_version": REPRO_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "target": config.target,
        "regress": list(config.regress),
        "fixes": list(config.fixes),
        "time_scale": config.shape.time_scale,
        "seed": config.shape.seed,
        "requests": config.shape.requests,
        "checked": list(checked or [v.name for v in verdicts]),
        "failing": failing,
        "verdicts": [v.to_dict() for v in verdicts],
        "figures": dict(figures),
        "budgets": budgets.to_dict(),
        "found_by": dict(found_by or {}),
        "config": config_to_dict(config),
        **({"refused": refused} if refused else {}),
    }


def write_repro(repro: Mapping[str, Any], directory: Path, stem: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(repro, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path


def replay_command(path: Path | str) -> str:
    return f"faultload replay {path}"


# The findings' repros, shipped with faultload so that an installed user replays them by name.
FINDING_REPROS = Path(__file__).resolve().parent / "finding_repros"


def repro_path(given: Path | str, repros: Path | None = None) -> Path:
    """``given`` when it names a file; else, for a bare name, the newest repro the suite or ``faultload shrink``
    wrote for it in ``repros`` (``test_no_lost_results``: its newest ``test_no_lost_results-*.json``), else the
    shipped finding repro of that name (``half_open_delivery-0.4.0``); else ``given`` (whose reading then says
    it is missing)."""
    path = Path(given)
    if path.exists() or path.parent != Path("."):
        return path
    name = path.name.removesuffix(".json")
    if repros is not None and repros.is_dir():
        written = [p for p in repros.glob(f"{name}-*.json") if not p.name.endswith(".report.json")]
        if written:
            return max(written, key=lambda p: (p.stat().st_mtime, p.name))
    shipped = FINDING_REPROS / f"{name}.json"
    return shipped if shipped.is_file() else path


def finding_repro_names() -> list[str]:
    return sorted(p.stem for p in FINDING_REPROS.glob("*.json"))


def load_repro(path: Path | str) -> tuple[dict[str, Any], Any, Budgets]:
    """(the file's data, its TrialConfig, its budgets); ValueError naming what is wrong."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ValueError(
            f"{path}: no such file (nor a property with a repro in the workspace, nor a finding "
            f"repro faultload ships: {', '.join(finding_repro_names())})"
        ) from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or "config" not in data:
        raise ValueError(f"{path}: not a faultload repro (no 'config')")
    version = data.get("repro_version")
    if version not in (REPRO_VERSION, COMPARE_REPRO_VERSION):
        raise ValueError(
            f"{path}: repro_version {version!r}; this faultload reads {REPRO_VERSION} and {COMPARE_REPRO_VERSION}"
        )
    if (version == COMPARE_REPRO_VERSION) != isinstance(data.get("compare"), dict):
        raise ValueError(
            f"{path}: repro_version {version} "
            + ("needs" if version == COMPARE_REPRO_VERSION else "has")
            + " a 'compare' block"
        )
    config = config_from_dict(data["config"])
    budgets = Budgets.from_mapping(data.get("budgets") or {}, f"{path} budgets")
    config.validate()
    return data, config, budgets


# --------------------------------------------------------------------------- replay


def _figure_line(name: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str:
    def fmt(block):
        if not block:
            return "-"
        mark = {True: "ok", False: "VIOLATED", None: "unknown"}[block.get("ok")]
        return f"{block.get('figure')} (budget {block.get('budget')}, {mark})"

    return f"  {name:<22} original {fmt(old)}  |  replay {fmt(new)}"


def _on_build(config, target: str | None, fixes: tuple[str, ...]):
    """``config`` on another build (``target``) or with candidate ``fixes`` added, to prove a fix; ValueError when
    they do not apply to it."""
    config = dataclasses.replace(
        config, target=target or config.target, fixes=tuple(dict.fromkeys(config.fixes + tuple(fixes)))
    )
    config.validate()
    return config


def _replay_status(failing_now: list[str], error: str | None) -> ReplayStatus:
    """A violation now reproduces the failure, whatever else went wrong; with none, a harness error leaves the
    server unjudged; else the failure did not come back."""
    if failing_now:
        return ReplayStatus.REPRODUCED
    return ReplayStatus.HARNESS_ERROR if error else ReplayStatus.NOT_REPRODUCED


def _status_line(outcome: ReplayStatus, failing_now: list[str], error: str | None) -> str:
    """The replay's verdict line: what fails now, or why nothing could be said of the server, or that it held."""
    return (
        f"{outcome.value}: "
        + (
            f"failing now: {', '.join(failing_now)}"
            if failing_now
            else f"{error} (no verdict on the server)"
            if error
            else "the failure did not reproduce on a fresh stack"
        )
        + (f"; harness error: {error}" if error and failing_now else "")
    )


def replay(
    path: Path | str,
    workspace,
    json_out: str | None = None,
    out=sys.stdout,
    *,
    target: str | None = None,
    fixes: tuple[str, ...] = (),
    html: str | None = None,
) -> ReplayStatus:
    """Run a repro file's trial on a fresh stack: REPRODUCED if its failure comes back, NOT_REPRODUCED if not.

    ``target`` and ``fixes`` run it against another build (a checkout with a
    fix: ``skyrl@PATH``) or with candidate fixes applied, to prove a fix: NOT_REPRODUCED
    then means the failure is gone there. ValueError when they do not apply.
    A comparative repro runs on both builds (``target``/``fixes`` change its
    candidate): REPRODUCED if the candidate is still worse (or a metric went unmeasured).
    """
    path = repro_path(path, workspace.repros)
    data, config, budgets = load_repro(path)
    if target is not None or fixes:
        config = _on_build(config, target, fixes)
    if data.get("compare") is not None:
        return replay_comparison(path, data, config, budgets, workspace, json_out, out, html)
    checked = tuple(data.get("checked") or ())
    original_failing = [v["name"] for v in data.get("failing", [])] + (["refused"] if data.get("refused") else [])
    print(
        f"replaying {path}: {config.shape.requests} requests, target {config.target}"
        + switches_text(config.regress, config.fixes)
        + f", time scale {config.shape.time_scale:g}; originally failed: {', '.join(original_failing) or 'nothing'}",
        file=out,
        flush=True,
    )
    try:
        result = run_trial(config, workspace)
    except SessionUnreadable as exc:  # the server's failure before any load: no trial to report, a verdict still
        print(f"{ReplayStatus.REPRODUCED.value}: failing now: {exc.verdict_line()}", file=out)
        return ReplayStatus.REPRODUCED
    if result.interrupted:
        return ReplayStatus.INTERRUPTED
    verdicts = judge(result, budgets)
    report = report_mod.build_report(result, verdicts)
    print(report_mod.render_text(report), file=out)
    figures = figures_of(verdicts)
    relevant = set(checked) if checked else {v.name for v in verdicts}
    failing_now = [v.name for v in verdicts if v.ok is False and v.name in relevant]
    outcome = _replay_status(failing_now, result.error)
    names = sorted(set(original_failing) | set(failing_now))
    status = outcome.value
    print(_status_line(outcome, failing_now, result.error), file=out)
    old_figures = data.get("figures") or {}
    for name in names or sorted(relevant):
        print(_figure_line(name, old_figures.get(name), figures.get(name)), file=out)
    if json_out:
        report["replay"] = {
            "repro": str(path),
            "status": status,
            "failing_now": failing_now,
            "originally_failing": original_failing,
            "original_figures": old_figures,
            "replay_figures": figures,
        }
        report_mod.write_json(report, json_out)
    if html:
        write_trial_html(result, verdicts, html)
    return outcome


def replay_repeated(
    path: Path | str,
    workspace,
    repeats: int,
    json_out: str | None = None,
    out=sys.stdout,
    *,
    target: str | None = None,
    fixes: tuple[str, ...] = (),
    html: str | None = None,
) -> ReplayStatus:
    """:func:`replay` ``repeats`` times, each on a fresh stack, then "reproduced k of N": REPRODUCED if any run
    reproduced it (flaky when not all did), HARNESS_ERROR if none did and a run could not be judged,
    NOT_REPRODUCED if every run held. Each run's outputs get ``-K`` before their suffix when N > 1."""
    path = repro_path(path, workspace.repros)  # a missing file is said before any run
    statuses: list[ReplayStatus] = []
    for k in range(1, repeats + 1):
        if repeats > 1:
            print(f"run {k} of {repeats}", file=out, flush=True)
        status = replay(
            path,
            workspace,
            numbered(json_out, k, repeats),
            out,
            target=target,
            fixes=fixes,
            html=numbered(html, k, repeats),
        )
        if status is ReplayStatus.INTERRUPTED:
            return status
        statuses.append(status)
    reproduced = statuses.count(ReplayStatus.REPRODUCED)
    if repeats > 1:
        print(
            f"reproduced {reproduced} of {repeats}"
            + (" (flaky: it does not come back every time)" if 0 < reproduced < repeats else "")
            + (
                f"; {statuses.count(ReplayStatus.HARNESS_ERROR)} not judged (harness error)"
                if ReplayStatus.HARNESS_ERROR in statuses
                else ""
            ),
            file=out,
        )
    if reproduced:
        return ReplayStatus.REPRODUCED
    return ReplayStatus.HARNESS_ERROR if ReplayStatus.HARNESS_ERROR in statuses else ReplayStatus.NOT_REPRODUCED


def numbered(path: str | None, k: int, n: int) -> str | None:
    """``path`` with ``-k`` before its suffix when there are ``n`` > 1 runs (report.json -> report-2.json)."""
    if path is None or n <= 1:
        return path
    p = Path(path)
    return str(p.with_name(f"{p.stem}-{k}{p.suffix}"))
