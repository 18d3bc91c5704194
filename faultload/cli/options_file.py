"""Command-line options kept in the settings file: ``[tool.faultload.options.<command>]`` for run, confirm and compare.

A CI job keeps its long command lines in the project's ``pyproject.toml`` (or
the file ``--config`` names, whose ``[tool.faultload.*]`` tables also hold the
budgets and the compare thresholds), each key an option's own name
(``requests = 512``, ``json-out = "run.json"``, ``fault = ["edge:down@1+2"]``);
what is typed on the command line wins, a repeatable option included. An unknown
key, or a value the option would refuse, is one line naming the file, the table
and the key. Stdlib only: :mod:`faultload.cli.main` reads it before any command.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from faultload.host.settings import find_config, read_faultload_table

COMMANDS = ("run", "confirm", "compare")
TABLE = "options"  # [tool.faultload.options.<command>]: apart from [tool.faultload.compare], the thresholds
# Options that choose the file or the workspace: never read from the file itself.
NOT_IN_FILE = ("config", "help")


def subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of ``faultload <command>``."""
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[command]


def file_options(command_parser: argparse.ArgumentParser, path: Path | None, command: str) -> dict[str, Any]:
    """``[tool.faultload.options.<command>]`` of ``path`` as argparse defaults (dest -> value), each checked as
    the option checks its typed value; ValueError in one line for an unknown key or a refused value."""
    where = f"{path}: [tool.faultload.options.{command}]"
    table = read_faultload_table(path, TABLE).get(command, {})
    if not isinstance(table, dict):
        raise ValueError(f"{where} is not a table")
    options = {
        name.lstrip("-"): action
        for action in command_parser._actions
        for name in action.option_strings
        if name.startswith("--") and action.dest not in NOT_IN_FILE
    }
    values: dict[str, Any] = {}
    for key, value in table.items():
        action = options.get(key) or options.get(key.replace("_", "-"))
        if action is None:
            raise ValueError(
                f"{where}: unknown option {key!r} (the keys are the options of "
                f"`faultload {command} --help`, without the dashes)"
            )
        values[action.dest] = _checked(action, value, f"{where} {key}")
    return values


def _checked(action: argparse.Action, value: Any, where: str) -> Any:
    """``value`` as the option takes it: a flag's bool, a repeatable option's list, else one converted value."""
    if action.nargs == 0:  # store_true / store_false
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(action, argparse._AppendAction):
        items = value if isinstance(value, list) else [value]
        return [_one(action, item, where) for item in items]
    return _one(action, value, where)


def _one(action: argparse.Action, value: Any, where: str) -> Any:
    if isinstance(value, (dict, list)) or isinstance(value, bool):
        raise ValueError(f"{where}: expected one value, got {value!r}")
    converted = value
    if action.type is not None:
        try:
            converted = action.type(str(value))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
    elif not isinstance(value, str):
        converted = str(value)
    if action.choices is not None and converted not in action.choices:
        raise ValueError(f"{where}: expected one of {', '.join(map(str, action.choices))}, got {value!r}")
    return converted


def parse_with_file(parser: argparse.ArgumentParser, argv: Sequence[str] | None, cwd: Path) -> argparse.Namespace:
    """Parse ``argv``; for run, confirm and compare, with the settings file's ``[tool.faultload.options.<command>]``
    as the defaults (the command line wins; ``parser`` is changed: build one per call). ``options_file`` on
    the result names the file and the keys it gave (None: none). ValueError for a file that cannot be used."""
    typed = parser.parse_args(argv)
    typed.options_file = None
    if typed.command not in COMMANDS:
        return typed
    command_parser = subparser(parser, typed.command)
    path = find_config(cwd, getattr(typed, "config", None))
    values = file_options(command_parser, path, typed.command)
    if not values:
        return typed
    appended = {
        a.dest: a.default for a in command_parser._actions if isinstance(a, argparse._AppendAction) and a.dest in values
    }
    command_parser.set_defaults(**values)
    merged = parser.parse_args(argv)
    for dest, default in appended.items():  # a repeatable option typed replaces the file's list
        if getattr(typed, dest) != default:
            setattr(merged, dest, getattr(typed, dest))
    merged.options_file = {"path": str(path), "keys": sorted(dest.replace("_", "-") for dest in values)}
    return merged
