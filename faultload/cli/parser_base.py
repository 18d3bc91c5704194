"""What every option module of the ``faultload`` parser builds on: the parser whose errors are one line, the help
formatter that shows each default once, and the value types whose errors say what was expected.

Apart from :mod:`faultload.cli.parser` so that the option modules (load, stack, output, many-trials,
stored-trial) share them without importing the parser that imports them. Standard library only.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

WORKDIR_HELP = "faultload's folder (default .faultload or $FAULTLOAD_HOME)"


class UsageError(Exception):
    """Bad input: one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one clear line, exit 2 (argparse prints usage too)
        # "argument --requests: ..." reads as "--requests: ..." (the option first, then what was wrong).
        raise UsageError(message.removeprefix("argument "))


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless its help already says it or it has none to show (a flag, None, [])."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text, default = action.help or "", action.default
        if (
            "default" in text
            or default is None
            or default is argparse.SUPPRESS
            or isinstance(default, bool)
            or default == []
        ):
            return text
        return super()._get_help_string(action)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """A text of several lines (an epilog's examples) keeps its lines; one line is wrapped as usual."""
        if "\n" in text:
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


def value_type(
    convert: Callable[[str], Any], expectation: str, ok: Callable[[Any], bool] = lambda value: True
) -> Callable[[str], Any]:
    """An argparse ``type`` whose error reads "expected <expectation>, got 'text'" (argparse names the option)."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expectation}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expectation}, got {text!r}")
        return value

    parse.__name__ = expectation
    return parse


whole_number = value_type(int, "a whole number >= 0", lambda value: value >= 0)
integer = value_type(int, "a whole number")
positive_int = value_type(int, "a whole number >= 1", lambda value: value >= 1)
number = value_type(float, "a number")
seconds = value_type(float, "a number of seconds >= 0", lambda value: value >= 0)
