"""Write the reference pages in docs/reference/ from the code: nothing in them is written by hand.

    cli.md             every subcommand and option (faultload.cli.parser.build_parser), the exit codes
    pytest-options.md  the plugin's options (faultload.suite.plugin.pytest_addoption) and environment
    invariants.md      the invariants, their figures and budgets, the contract's rules, the suite's properties
    switches.md        the regression and fix switches
    matrix-rows.md     the detection matrix's rows
    settings.md        the settings file's tables: command options, compare thresholds, watchdog limits
    json.md            the JSON contracts' versions and keys, the trial bundle's files

Usage: .faultload/venv/bin/python scripts/reference.py [--check] [--out DIR]
  --check: write nothing; exit 1 naming each page that differs from what the code gives (0 when all match).

The plugin's options are read by running its ``pytest_addoption`` against a recording stand-in parser
(:class:`Recorder`), not a real ``pytest.Parser``: the stand-in keeps each ``addoption`` call exactly as the
plugin made it, with no other plugin's options mixed in and without pytest's private constructor
(``Parser(_ispytest=True)``); a parser method the plugin starts to call that the stand-in lacks fails here,
loudly, instead of being left out of the page.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
# the checkout's faultload, not an install's
from reference_json import json_page, sample_trial  # noqa: E402
from reference_text import HEADER, cell, code, codes, default_text, docstring_figure, first_paragraph, table  # noqa: E402

from faultload.checker.budget_docs import BUDGET_DOCS  # noqa: E402
from faultload.checker.budgets import PYPROJECT_TABLE, Budgets  # noqa: E402
from faultload.checker.compose import CHECKERS  # noqa: E402
from faultload.checker.contract import RULES  # noqa: E402
from faultload.checker.growth import NAME as SESSION_GROWTH  # noqa: E402
from faultload.checker.growth import check_session_growth
from faultload.checker.judge import collapse_verdict  # noqa: E402
from faultload.checker.training import TRAINING_CHECKERS  # noqa: E402
from faultload.cli.exits import EXIT_CODES, REPLAY_EXITS, SUITE_EXIT_CODES  # noqa: E402
from faultload.cli.options_file import COMMANDS as FILE_COMMANDS  # noqa: E402
from faultload.cli.parser import build_parser  # noqa: E402
from faultload.compare.judge import CompareSettings  # noqa: E402
from faultload.compare.metrics import METRICS  # noqa: E402
from faultload.matrix.row import NOT_RUN  # noqa: E402
from faultload.matrix.rows import DEFAULT_ROWS, MatrixRow  # noqa: E402
from faultload.model.family import TRAITS  # noqa: E402
from faultload.model.switches import FIXES, REGRESSIONS  # noqa: E402
from faultload.model.watchdog import WATCHDOG_KEYS, WatchdogLimits  # noqa: E402
from faultload.suite import plugin  # noqa: E402
from faultload.suite.properties import PROPERTIES, checked  # noqa: E402
from faultload.targets import hatchery_fixes, tuft_fixes, twinkle_fixes
from faultload.targets import skyrl_mutants as mutants  # noqa: E402 (the target side's)
from faultload.targets import skyrl_patches as patches

OUT = ROOT / "docs" / "reference"


class Recorder:
    """Stands in for pytest's ``Parser`` and its option group: records each group and ``addoption`` call."""

    def __init__(self) -> None:
        self.groups: dict[str, str] = {}
        self.options: list[tuple[tuple[str, ...], dict]] = []

    def getgroup(self, name: str, description: str = "", after: str | None = None) -> "Recorder":
        self.groups.setdefault(name, description)
        return self

    def addoption(self, *names: str, **attrs) -> None:
        self.options.append((names, attrs))


def _commands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers, in the parser's order ({} when it has none)."""
    found = _commands(parser)
    return dict(found.choices) if found else {}


def _value(choices, metavar: str, flag: bool, repeatable: bool, positional: bool = False) -> str:
    """What an option takes: its choices, a positional value, a flag's nothing, or its metavar."""
    text = (
        ", ".join(code(c) for c in choices)
        if choices
        else "positional"
        if positional
        else "flag"
        if flag
        else code(metavar)
    )
    return text + (", repeatable" if repeatable else "")


def _option_rows(parser: argparse.ArgumentParser) -> list[list[str]]:
    expand = argparse.HelpFormatter(parser.prog)._expand_help  # %(default)s and the like, no default appended
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(code(o) for o in action.option_strings) or code(action.metavar or action.dest)
        flag = isinstance(action, argparse._StoreConstAction)  # store_true and store_false among them
        value = _value(
            action.choices,
            action.metavar or action.dest.upper(),
            action.nargs == 0,
            isinstance(action, argparse._AppendAction),
            not action.option_strings,
        )
        default = "required" if action.required else default_text(action.default, flag)
        rows.append([name, value, default, cell(expand(action) if action.help else "")])
    return rows


def cli_page(parser: argparse.ArgumentParser) -> str:
    commands = subparsers(parser)
    helps = {choice.dest: choice.help for choice in _commands(parser)._choices_actions}
    lines = [
        HEADER,
        f"# {parser.prog}: the command line",
        "",
        cell(parser.description or ""),
        "",
        table(["option", "value", "default", "help"], _option_rows(parser)),
        "",
        table(["command", "what it does"], [[code(f"{parser.prog} {n}"), cell(helps.get(n, ""))] for n in commands]),
        "",
    ]
    for name, command in commands.items():
        lines += [
            f"## {parser.prog} {name}",
            "",
            cell(command.description or ""),
            "",
            table(["option", "value", "default", "help"], _option_rows(command)),
            "",
        ]
        if command.epilog:
            lines += ["```", command.epilog.strip("\n"), "```", ""]
    lines += [
        "## Exit codes",
        "",
        table(["code", "meaning"], [[code(c), cell(t)] for c, t in EXIT_CODES.items()]),
        "",
        f"`{parser.prog} replay`, by what the replay came to:",
        "",
        table(["replay", "code"], [[status.value, code(c)] for status, c in REPLAY_EXITS.items()]),
    ]
    return "\n".join(lines) + "\n"


def pytest_page() -> str:
    recorder = Recorder()
    plugin.pytest_addoption(recorder)
    rows = []
    for names, attrs in recorder.options:
        flag = attrs.get("action") in ("store_true", "store_false")
        value = _value(
            attrs.get("choices"),
            attrs.get("metavar") or names[0].lstrip("-").upper(),
            flag,
            attrs.get("action") == "append",
        )
        rows.append(
            [
                ", ".join(code(n) for n in names),
                value,
                default_text(attrs.get("default"), flag),
                cell(attrs.get("help", "")),
            ]
        )
    marker, _, says = plugin.MARKER.partition(":")
    groups = "; ".join(cell(description) for description in recorder.groups.values())
    return "\n".join(
        [
            HEADER,
            "# pytest --pyargs faultload.suite: the plugin's options",
            "",
            groups,
            "",
            table(["option", "value", "default", "help"], rows),
            "",
            "## Environment",
            "",
            "Read once, when pytest configures the session:",
            "",
            table(["variable", "what for"], [[code(name), cell(what)] for name, what in plugin.ENVIRONMENT.items()]),
            "",
            "## Marker",
            "",
            f"{code(marker)}: {cell(says.strip())}",
            "",
            "## Exit codes",
            "",
            table(["code", "meaning"], [[code(c), cell(t)] for c, t in SUITE_EXIT_CODES.items()]),
            "",
        ]
    )


def invariants() -> list[tuple[str, object, str]]:
    """(name, what judges it, what it judges beside every trial), in the order they are judged."""
    collapse = collapse_verdict(sample_trial()).name  # the name the watchdog's verdict carries
    return (
        [(name, fn, "") for name, fn in CHECKERS]
        + [(name, fn, " (a trial that trained)") for name, fn in TRAINING_CHECKERS]
        + [(collapse, collapse_verdict, ""), (SESSION_GROWTH, check_session_growth, " (a suite session)")]
    )


def invariants_page() -> str:
    found = invariants()
    budgets = Budgets().to_dict()
    by_invariant: dict[str, list[str]] = {}
    for name, doc in BUDGET_DOCS.items():
        for invariant in doc.invariants:
            by_invariant.setdefault(invariant, []).append(name)
    rows = [
        [
            code(name) + note,
            cell(first_paragraph(fn)),
            cell(docstring_figure(name, fn)),
            codes(by_invariant.get(name, ())),
        ]
        for name, fn, note in found
    ]
    budget_rows = [
        [code(name), code(_budget_value(budgets[name], doc.unit)), cell(doc.unit), codes(doc.invariants), cell(doc.why)]
        for name, doc in BUDGET_DOCS.items()
    ]
    property_rows = [[code(p.name), codes(checked(p)), codes(p.steers_by), codes(p.known)] for p in PROPERTIES]
    table_name = ".".join(PYPROJECT_TABLE)
    return "\n".join(
        [
            HEADER,
            "# Invariants",
            "",
            "Every trial is judged by each invariant below, in this order; the JSON report's `invariants` holds each "
            "verdict as `{name, ok, figure, budget, detail, head, notes, cases}` (`detail`: the line the reports show, "
            "rendered from `head` and `notes`; `cases`: `{rule, rows}`, the contract's rules that covered requests).",
            "",
            table(["invariant", "holds when", "figure", "budgets"], rows),
            "",
            "## Budgets",
            "",
            f"Defaults; set them in `[{table_name}]` of `pyproject.toml` or per run with `--budget NAME=VALUE`.",
            "",
            table(["budget", "default", "unit", "invariants", "why"], budget_rows),
            "",
            "## The futures contract",
            "",
            table(["name", "says", "why"], [[code(r.name), cell(r.says), cell(r.why)] for r in RULES]),
            "",
            "## Properties",
            "",
            "Each property of `pytest --pyargs faultload.suite` asserts its invariants (`faultload/suite/properties.py`) "
            "and steers Hypothesis toward the figures of some; known trials run first where the profile asks.",
            "",
            table(["property", "asserts", "steers by", "known trials"], property_rows),
            "",
        ]
    )


def _budget_value(value, unit: str) -> str:
    if value is None:
        return "the family's"
    if isinstance(value, list):
        return str(value)
    if unit.startswith("bytes") and isinstance(value, int) and value >= 1024 and value % 1024 == 0:
        kib = value // 1024
        return f"{value} ({kib // 1024} MiB)" if kib % 1024 == 0 else f"{value} ({kib} KiB)"
    return str(value)


def switches_page() -> str:
    rows = []
    described = {
        **patches.FIXES,
        **patches.REGRESSIONS,
        **mutants.MUTANTS,
        **tuft_fixes.FIXES,
        **hatchery_fixes.FIXES,
        **twinkle_fixes.FIXES,
    }
    for name in (*REGRESSIONS, *FIXES):
        if name not in described:
            raise SystemExit(
                f"reference: switch {name!r} (faultload/model/switches.py) has no patch in "
                "faultload/targets/skyrl_patches.py, skyrl_mutants.py, tuft_fixes.py, hatchery_fixes.py or twinkle_fixes.py to describe it"
            )
        if name in FIXES:
            kind = "fix: a candidate fix"
        elif name in mutants.MUTANTS:
            kind = "regression: a bug class a pull request could make"
        else:
            kind = "regression: undoes an upstream fix"
        families = [family for family, traits in TRAITS.items() if name in traits.regressions + traits.fixes]
        used = [row.name for row in DEFAULT_ROWS if name in row.regress or name in row.fixes]
        switch = described[name]
        rows.append(
            [code(name), ", ".join(families), kind, cell(first_paragraph(getattr(switch, "func", switch))), codes(used)]
        )
    return "\n".join(
        [
            HEADER,
            "# Regression and fix switches",
            "",
            "A switch changes the server faultload launches: `--regress NAME` or `--fix NAME` (`faultload run`, "
            "`confirm`), `--faultload-regress`/`--faultload-fix` (`pytest --pyargs faultload.suite`), `+regress=NAME`/`+fix=NAME` in "
            "a build (`faultload compare`). Each belongs to a server family; another family's target refuses it.",
            "",
            table(["switch", "family", "kind", "what it does", "matrix rows"], rows),
            "",
        ]
    )


def _expectation(row: MatrixRow, profile: str) -> str:
    want = row.expectation(profile)
    text = ("not run" if want.expected == NOT_RUN else want.expected) + (
        f" by {' or '.join(code(n) for n in want.caught_by)}" if want.caught_by else ""
    )
    return text + (f": {want.why}" if want.why != row.why else "")


def matrix_page() -> str:
    matrix = subparsers(build_parser())["matrix"]  # its --profile choices are the profiles a row may run on
    profiles = next(a.choices for a in matrix._actions if "--profile" in a.option_strings)
    rows = []
    for row in DEFAULT_ROWS:
        runs = (
            f"`faultload compare` with {code(row.baseline)}: {code(' '.join(row.compare_trial))}"
            if row.baseline
            else f"the suite, `-k {row.only}`"
            if row.only
            else "the suite"
        )
        rows.append(
            [code(row.name), code(row.build), runs] + [cell(_expectation(row, p)) for p in profiles] + [cell(row.why)]
        )
    return "\n".join(
        [
            HEADER,
            "# The detection matrix's rows",
            "",
            "`faultload matrix` runs each row on a profile and checks it comes out as expected there.",
            "",
            table(["row", "build", "runs", *(f"expected on {p}" for p in profiles), "why"], rows),
            "",
        ]
    )


def settings_page() -> str:
    defaults, limits = CompareSettings(), WatchdogLimits()
    return "\n".join(
        [
            HEADER,
            "# Settings file",
            "",
            "faultload reads `[tool.faultload.*]` tables from the file `--config FILE` names, else from the nearest "
            "`pyproject.toml` holding a `[tool.faultload]` table, from the current folder upward (pytest: from its "
            "rootdir). A key the table does not know, or a value it refuses, is one line naming the file, the table "
            "and the key (exit 2).",
            "",
            "## Command options: " + ", ".join(f"`[tool.faultload.options.{c}]`" for c in FILE_COMMANDS),
            "",
            "Each key is an option of the command by its own name, without the dashes (`requests = 512`, "
            '`json-out = "run.json"`, a repeatable option as a list: `fault = ["edge:down@1+2"]`, a flag as '
            "`true`); the defaults are the [command line's](cli.md). What is typed on the command line wins, a "
            "repeatable option included; the command says on stderr which keys it took from which file. "
            "`--config` itself cannot be set there.",
            "",
            "## Budgets: `[tool.faultload.budgets]`",
            "",
            "The invariants' budgets, each with its default: [Invariants](invariants.md#budgets). "
            "`--budget NAME=VALUE` overrides one for a run.",
            "",
            "## Compare thresholds: `[tool.faultload.compare]`",
            "",
            "A metric is worse when its ratio (candidate / baseline) is past its threshold and its whole interval "
            "is past 1.",
            "",
            table(
                ["key", "default", "worse when", "metric"],
                [
                    [
                        code(m.name),
                        code(defaults.thresholds[m.name]),
                        "higher" if m.higher_is_worse else "lower",
                        cell(m.about),
                    ]
                    for m in METRICS
                ]
                + [
                    [code("confidence"), code(defaults.confidence), "", "the intervals' confidence"],
                    [code("resamples"), code(defaults.resamples), "", "bootstrap resamples per interval"],
                ],
            ),
            "",
            "## Watchdog: `[tool.faultload.watchdog]`",
            "",
            table(
                ["key", "default", "meaning"],
                [[code(name), code(getattr(limits, name)), cell(text)] for name, text in WATCHDOG_KEYS.items()],
            ),
            "",
        ]
    )


def pages() -> dict[str, str]:
    """File name -> text of every reference page, as the code gives them now."""
    return {
        "settings.md": settings_page(),
        "cli.md": cli_page(build_parser()),
        "pytest-options.md": pytest_page(),
        "invariants.md": invariants_page(),
        "switches.md": switches_page(),
        "matrix-rows.md": matrix_page(),
        "json.md": json_page(),
    }


def stale(out: Path, wanted: dict[str, str]) -> list[str]:
    """The pages under ``out`` that are missing or differ from ``wanted``."""
    return [
        name
        for name, text in wanted.items()
        if not (out / name).is_file() or (out / name).read_text(encoding="utf-8") != text
    ]


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it is in it."""
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale page")
    parser.add_argument("--out", default=str(OUT), help="the folder of the pages (default docs/reference)")
    args = parser.parse_args(argv)
    out, wanted = Path(args.out), pages()
    if args.check:
        names = stale(out, wanted)
        for name in names:
            state = "stale" if (out / name).is_file() else "missing"
            print(
                f"reference: {_shown(out / name)} is {state}: run `python scripts/reference.py` to write it from "
                "the code",
                file=sys.stderr,
            )
        return 1 if names else 0
    out.mkdir(parents=True, exist_ok=True)
    for name, text in wanted.items():
        (out / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
