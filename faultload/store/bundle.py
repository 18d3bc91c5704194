"""A trial bundle: one directory holding everything needed to judge a trial again, offline.

Jepsen's store/analyze split: ``faultload run --bundle DIR`` (and the suite,
beside every repro) writes what the trial recorded; ``faultload check DIR``
loads it and runs the checker over it again, with the stored budgets or others,
without starting a server, a router or a load worker. This module imports none
of the trial runner, the stack, the router or the client (``tests/repo/test_layering.py``).

A bundle's files::

    bundle.json    format version, versions (faultload, target, Python, numpy), the file list
    config.json    the TrialConfig (faultload.model.codec's JSON)
    budgets.json   the budgets it was judged with
    trial.json     the rest of the TrialResult (every other field as it is): router stats and completion times, the load's
                   stop time and flags (stopped early, cut off, interrupted), the watchdog's
                   verdict, per-worker error examples and latency histograms, CPU, server, errors,
                   the wall's phases (``phases_s``; absent from older bundles)
    monitor.json   the monitor's samples and /healthz probes (null when none were taken)
    faults.json    the fault log, as applied and removed (null when no fault was scheduled)
    server_log.json  the server log's classes, with every occurrence's time (null when not read)
    training.json  the training clients' calls (null without a training mix; absent from older bundles)
    history.npz    the per-request history and its attempts (History.save)
    verdicts.json  the verdicts as judged (``to_report`` form)
    verdicts.txt   the verdict lines as the run printed them

:func:`load_bundle` gives a :class:`StoredTrial`: the ``TrialResult`` (one record type,
``faultload.record.trial``) plus the budgets, verdicts and versions stored.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from faultload.checker.budgets import Budgets
from faultload.checker.compose import to_report
from faultload.checker.inputs import Verdict
from faultload.model.codec import config_from_dict, config_to_dict
from faultload.record.collapse import CollapseVerdict
from faultload.record.faults import FaultLog
from faultload.record.history import History
from faultload.record.samples import MonitorSamples
from faultload.record.serverlog import ServerLogSummary
from faultload.record.training import TrainingLog
from faultload.record.trial import TrialResult, WorkerSummary
from faultload.store.report_text import verdict_lines
from faultload.version import installed_version

BUNDLE_VERSION = 1
MANIFEST = "bundle.json"
# The fields trial.json keeps in a form of their own (or another file does); every other field of a
# TrialResult is stored as it is (a JSON value already), so a field added to the record is kept too.
ENCODED_FIELDS = frozenset(
    {
        "config",
        "history",
        "workers",
        "monitor",
        "fault_log",
        "server_log",
        "verdict",
        "router_completed_s",
        "router_repeats",
        "training",
    }
)
PLAIN_FIELDS = tuple(f.name for f in dataclasses.fields(TrialResult) if f.name not in ENCODED_FIELDS)


@dataclass
class StoredTrial(TrialResult):
    """A trial as its bundle holds it: the ``TrialResult``, and what it was judged with."""

    budgets: Budgets = field(default_factory=Budgets)
    verdicts: list[Verdict] = field(default_factory=list)  # as judged when the bundle was written
    versions: dict[str, Any] = field(default_factory=dict)


def versions_of(result: TrialResult) -> dict[str, Any]:
    """What judged and what was judged: faultload, the target (spec and version), Python, numpy."""
    return {
        "faultload": installed_version(),
        "target": result.config.target,
        "target_version": result.server.get("version"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": sys.platform,
    }


def _optional(value: Any) -> Any:
    return None if value is None else value.to_dict()


def _exact(value: Any) -> Any:
    return None if value is None else value.to_dict(exact=True)


def write_bundle(result: TrialResult, budgets: Budgets, verdicts: Sequence[Verdict], directory: str | Path) -> Path:
    """Write ``result``'s bundle into ``directory`` (created; files of an older bundle replaced)."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    report = to_report(verdicts)
    collapse = result.verdict.to_dict() if result.verdict else None
    trial = {name: getattr(result, name) for name in PLAIN_FIELDS}
    trial.update(
        workers=[w.to_dict() for w in result.workers],
        verdict=_exact(result.verdict),
        router_completed_s={str(nonce): s for nonce, s in result.router_completed_s.items()},
        router_repeats=None
        if result.router_repeats is None
        else {str(nonce): n for nonce, n in result.router_repeats.items()},
    )
    files = {
        "config.json": config_to_dict(result.config),
        "budgets.json": budgets.to_dict(),
        "trial.json": trial,
        "monitor.json": _optional(result.monitor),
        "faults.json": _optional(result.fault_log),
        "server_log.json": _exact(result.server_log),
        "verdicts.json": report,
        "training.json": _optional(result.training),
    }
    for name, data in files.items():
        write_text_atomic(path / name, json.dumps(data, indent=1, default=str) + "\n")
    result.history.save(str(path / "history.npz"))
    write_text_atomic(path / "verdicts.txt", "\n".join(verdict_lines(report, collapse)) + "\n")
    manifest = {
        "bundle_version": BUNDLE_VERSION,
        "versions": versions_of(result),
        "files": sorted([*files, "history.npz", "verdicts.txt"]),
    }
    write_text_atomic(path / MANIFEST, json.dumps(manifest, indent=1) + "\n")  # last: a bundle with a manifest is whole
    return path


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, then ``os.replace``."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def load_bundle(directory: str | Path) -> StoredTrial:
    """The trial stored in ``directory``; ValueError (one line, naming the file) when it is not a whole bundle."""
    path = Path(directory)
    manifest = _read_json(path, MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("bundle_version") != BUNDLE_VERSION:
        version = manifest.get("bundle_version") if isinstance(manifest, dict) else None
        raise ValueError(f"{path / MANIFEST}: bundle_version {version!r}; this faultload reads {BUNDLE_VERSION}")
    try:
        return _stored_trial(path, manifest)
    except (KeyError, TypeError, AttributeError) as exc:  # ValueErrors name their file already
        raise ValueError(f"{path}: not a whole faultload bundle ({type(exc).__name__}: {exc})") from None


def _stored_trial(path: Path, manifest: Mapping[str, Any]) -> StoredTrial:
    trial = _read_json(path, "trial.json")
    monitor, faults, log = (_read_json(path, n) for n in ("monitor.json", "faults.json", "server_log.json"))
    try:
        history = History.load(str(path / "history.npz"))
    except (OSError, KeyError, ValueError) as exc:
        raise ValueError(f"{path / 'history.npz'}: cannot read: {exc}") from None
    return StoredTrial(
        config=config_from_dict(_read_json(path, "config.json")),
        history=history,
        workers=[WorkerSummary.from_dict(w) for w in trial["workers"]],
        monitor=None if monitor is None else MonitorSamples.from_dict(monitor),
        fault_log=None if faults is None else FaultLog.from_dict(faults),
        server_log=None if log is None else ServerLogSummary.from_dict(log),
        verdict=None if trial["verdict"] is None else CollapseVerdict.from_dict(trial["verdict"]),
        router_completed_s={int(nonce): float(s) for nonce, s in trial["router_completed_s"].items()},
        router_repeats=None
        if trial.get("router_repeats") is None
        else {int(nonce): int(n) for nonce, n in trial["router_repeats"].items()},  # None: written before it
        budgets=Budgets.from_mapping(_read_json(path, "budgets.json"), f"{path / 'budgets.json'}"),
        verdicts=[Verdict.from_dict(v) for v in _read_json(path, "verdicts.json")],
        versions=dict(manifest.get("versions") or {}),
        training=_training(path),
        # a field written after a bundle was: its default ({} phases_s from a bundle older than it)
        **{name: trial[name] for name in PLAIN_FIELDS if name in trial},
    )


def _training(path: Path) -> TrainingLog | None:
    """The training log; None when the trial had none, or the bundle predates training.json."""
    if not (path / "training.json").exists():
        return None
    data = _read_json(path, "training.json")
    try:
        return None if data is None else TrainingLog.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path / 'training.json'}: {exc}") from None


def _read_json(path: Path, name: str) -> Any:
    try:
        return json.loads((path / name).read_text())
    except FileNotFoundError:
        what = "no such directory" if not path.is_dir() else f"no {name} (not a faultload bundle?)"
        raise ValueError(f"{path}: {what}") from None
    except OSError as exc:
        raise ValueError(f"{path / name}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path / name}: not JSON ({exc})") from None
