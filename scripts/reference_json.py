"""docs/reference/json.md for scripts/reference.py: the JSON contracts' versions and keys, from samples the code builds.

Each contract's keys are those of a sample made by the code that writes it (an empty trial, judged and
reported; a comparison of its report with itself; a matrix of no rows; a bundle and a repro of it), plus the
keys the command line adds to them when asked (read from the assignments in its source).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace

from reference_text import HEADER, cell, code, codes, table

from faultload.checker.budgets import Budgets
from faultload.checker.judge import judge
from faultload.compare.judge import SCHEMA as COMPARE_SCHEMA
from faultload.compare.judge import CompareSettings, judge_comparison
from faultload.compare.metrics import METRIC_NAMES
from faultload.conformance.rules import RULES as CONFORMANCE_RULES
from faultload.conformance.run import KEPT, STATUSES, Cell, Conformance
from faultload.conformance.table import SCHEMA as CONFORMANCE_SCHEMA
from faultload.conformance.table import to_dict as conformance_dict
from faultload.matrix.run import SCHEMA as MATRIX_SCHEMA
from faultload.matrix.run import RowResult, run_matrix
from faultload.model.target import DEFAULT_TARGET
from faultload.model.trial import TrialConfig
from faultload.record.history import History
from faultload.record.trial import TrialResult
from faultload.store import bundle, repro
from faultload.store.report import CONTRACT_KEYS, REPORT_VERSION, build_report
from faultload.suite.comparative import ComparingExecutor

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ROOT / "faultload" / "cli" / "commands.py"
MANY_TRIALS = ROOT / "faultload" / "cli" / "many_trials.py"
# the bundle docstring's file list: "    name   what it holds", continued on deeper-indented lines
_BUNDLE_ENTRY = re.compile(r"^    (\S+)\s+(.*)$")


def sample_trial() -> TrialResult:
    """A trial of no requests: every record the code keeps, empty."""
    return TrialResult(TrialConfig(target=DEFAULT_TARGET), History.empty(0))


def assigned_keys(path: Path, function: str, variable: str) -> list[str]:
    """The keys ``variable["key"] = ...`` sets in ``function`` of ``path``, in source order."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    found = sorted(
        (t.lineno, t.col_offset, t.slice.value)
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Subscript)
        and isinstance(t.value, ast.Name)
        and t.value.id == variable
        and isinstance(t.slice, ast.Constant)
    )
    return list(dict.fromkeys(key for _, _, key in found))


def bundle_files() -> dict[str, str]:
    """File -> what it holds, from ``faultload.store.bundle``'s docstring."""
    described: dict[str, str] = {}
    lines = (bundle.__doc__ or "").split("A bundle's files::", 1)[-1].strip("\n").splitlines()
    name = None
    for line in lines:
        entry = _BUNDLE_ENTRY.match(line)
        if entry:
            name, described[entry.group(1)] = entry.group(1), entry.group(2)
        elif line.startswith("     ") and name:
            described[name] += " " + line.strip()
        elif line.strip():
            break
    return {name: cell(text.replace("``", "`")) for name, text in described.items()}


def _report_section(report: dict) -> list[str]:
    extras = assigned_keys(COMMANDS, "_write_extras", "report")
    replayed = assigned_keys(ROOT / "faultload" / "store" / "repro.py", "replay", "report")
    rows = [[code(key), "yes" if key in CONTRACT_KEYS else ""] for key in report]
    return [
        "## `faultload run --json-out`: the trial report",
        "",
        f"`report_version`: {code(REPORT_VERSION)}. Keys marked as contract are only ever added to.",
        "",
        table(["key", "contract"], rows),
        "",
        f"Added when their output is asked for: {codes(extras)}; by `faultload replay --json-out`: {codes(replayed)}.",
        "",
    ]


def _compare_section(report: dict) -> list[str]:
    result = judge_comparison(DEFAULT_TARGET, DEFAULT_TARGET, [report], [report], CompareSettings())
    extras = assigned_keys(MANY_TRIALS, "write_comparison", "result")
    return [
        f"## `{COMPARE_SCHEMA}`: `faultload compare --json-out`",
        "",
        f"Keys: {codes(result)}; with `--plot`: {codes(extras)}.",
        "",
        f"Each of `metrics`: {codes(result['metrics'][0])}.",
        "",
        f"Metrics: {codes(METRIC_NAMES)}.",
        "",
    ]


def _matrix_section(scratch: Path) -> list[str]:
    result = run_matrix([], "ci", workdir=scratch / "matrix", log=lambda message: None, spread=lambda rows, run: [])
    return [
        f"## `{MATRIX_SCHEMA}`: `faultload matrix --json-out`",
        "",
        f"Keys: {codes(result)}.",
        "",
        f"Each of `rows`: {codes(f.name for f in dataclasses.fields(RowResult))}.",
        "",
    ]


def _conformance_section() -> list[str]:
    table = Conformance((DEFAULT_TARGET,), (), 0.05, CONFORMANCE_RULES[:1])
    table.cells = [Cell(DEFAULT_TARGET, CONFORMANCE_RULES[0].name, KEPT)]
    data = conformance_dict(table)
    return [
        f"## `{CONFORMANCE_SCHEMA}`: `faultload conformance --json-out`",
        "",
        f"Keys: {codes(data)}.",
        "",
        f"Each of `rules`: {codes(data['rules'][0])}. Each of `cells`: {codes(data['cells'][0])}; "
        f"`status` one of {codes(STATUSES)}.",
        "",
    ]


def _bundle_section(trial: TrialResult, verdicts, scratch: Path) -> list[str]:
    path = bundle.write_bundle(trial, Budgets(), verdicts, scratch / "bundle")
    manifest = json.loads((path / bundle.MANIFEST).read_text(encoding="utf-8"))
    described = bundle_files()
    missing = [name for name in [bundle.MANIFEST, *manifest["files"]] if name not in described]
    if missing:
        raise ValueError(f"faultload/store/bundle.py's docstring does not describe {', '.join(missing)}")
    rows = [[code(name), described[name]] for name in [bundle.MANIFEST, *manifest["files"]]]
    return [
        "## Trial bundles: `faultload run --bundle DIR`",
        "",
        f"`bundle_version`: {code(bundle.BUNDLE_VERSION)}; `{bundle.MANIFEST}` keys: {codes(manifest)}.",
        "",
        table(["file", "holds"], rows),
        "",
    ]


def _repro_section(trial: TrialResult, verdicts) -> list[str]:
    keys = repro.build_repro(trial.config, verdicts, repro.figures_of(verdicts), Budgets())
    comparative = ComparingExecutor.repro_fields(
        SimpleNamespace(repeats=1, settings=CompareSettings()), SimpleNamespace(comparison=None)
    )
    written = assigned_keys(ROOT / "faultload" / "suite" / "repros.py", "write_property_repro", "repro")
    return [
        "## Repro files: `pytest --pyargs faultload.suite`, read by `faultload replay`",
        "",
        f"`repro_version`: {code(repro.REPRO_VERSION)}; a comparative repro (`--faultload-baseline`): "
        f"{code(repro.COMPARE_REPRO_VERSION)}.",
        "",
        f"Keys: {codes(keys)}; a comparative repro's too: {codes(comparative)}; beside them, the files the "
        f"suite wrote and the commands to use them: {codes(written)}.",
        "",
    ]


def json_page() -> str:
    trial = sample_trial()
    verdicts = judge(trial, Budgets())
    report = build_report(trial, verdicts)
    with tempfile.TemporaryDirectory() as scratch:
        sections = (
            _report_section(report)
            + _compare_section(report)
            + _matrix_section(Path(scratch))
            + _conformance_section()
            + _bundle_section(trial, verdicts, Path(scratch))
            + _repro_section(trial, verdicts)
        )
    return "\n".join([HEADER, "# JSON contracts", "", *sections])
