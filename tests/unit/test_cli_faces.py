"""The CLI and the plugin follow their ecosystems' conventions.

``faultload --version`` and ``python -m faultload``; a help line and the
shown default on every option of every subcommand (and of the plugin's
``--faultload-*`` options); a bad value names the option and what it expects
in one line, exit 2.
"""

from __future__ import annotations

import argparse
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from conftest import run_cli

import faultload
from faultload.cli import commands as cli_commands
from faultload.cli import main as cli
from faultload.cli import parser as cli_parser
from faultload.model.target import DEFAULT_TARGET
from faultload.suite import plugin
from faultload.suite.defaults import DEFAULT_PROFILE

ROOT = Path(__file__).resolve().parents[2]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.option_strings and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))
    ]


SUBCOMMANDS = sorted(_subparsers(cli_parser.build_parser()))


def test_every_subcommand_is_checked():
    assert set(SUBCOMMANDS) == set(cli_commands.COMMANDS)


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_option_has_a_help_line_that_shows_its_default(command: str):
    parser = _subparsers(cli_parser.build_parser())[command]
    formatter = parser._get_formatter()
    for action in _options(parser):
        name = action.option_strings[0]
        assert action.help and action.help.strip(), f"{command} {name}: no help"
        if isinstance(action, argparse._StoreTrueAction):
            continue  # a flag: off unless given
        shown = formatter._expand_help(action)
        assert "default" in shown, f"{command} {name}: no default shown in {shown!r}"
        if "default" not in action.help:  # the formatter shows the value itself
            assert shown.endswith(f"(default: {action.default})"), (command, name, shown)


def test_confirm_shows_its_own_defaults():
    confirm = _subparsers(cli_parser.build_parser())["confirm"]
    requests = next(a for a in confirm._actions if "--requests" in a.option_strings)
    assert "(default: 131072)" in confirm._get_formatter()._expand_help(requests)


@pytest.mark.parametrize(
    "argv, line",
    [
        (["run", "--requests", "abc"], "faultload: error: --requests: expected a whole number >= 0, got 'abc'"),
        (["run", "--requests", "-5"], "faultload: error: --requests: expected a whole number >= 0, got '-5'"),
        (["run", "--time-scale", "fast"], "faultload: error: --time-scale: expected a number, got 'fast'"),
        (["run", "--seed", "1.5"], "faultload: error: --seed: expected a whole number, got '1.5'"),
        (["confirm", "--max-wall", ""], "faultload: error: --max-wall: expected a number, got ''"),
        (["matrix", "--session-s", "-1"], "faultload: error: --session-s: expected a number of seconds >= 0, got '-1'"),
        (
            ["run", "--client", "grpc"],
            "faultload: error: --client: invalid choice: 'grpc' (choose from 'raw', 'raw-python', 'sdk')",
        ),
    ],
)
def test_a_bad_value_names_the_option_and_the_expectation(capsys, argv: list[str], line: str):
    assert cli.main(argv) == cli.EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [line]
    assert captured.out == ""


def test_python_m_faultload_is_the_cli():
    result = run_cli(["run", "--requests", "abc", "--quiet"], timeout_s=60.0, prefix=["-m", "faultload"])
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["faultload: error: --requests: expected a whole number >= 0, got 'abc'"]


def test_version():
    result = run_cli(["--version"], timeout_s=60.0, prefix=["-m", "faultload"])
    assert (result.returncode, result.stdout, result.stderr) == (0, f"faultload {metadata.version('faultload')}\n", "")


def test_version_falls_back_to_the_package_when_not_installed(monkeypatch):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    assert cli_parser.version() == faultload.__version__


def test_the_version_is_written_once_and_installed_as_written():
    """``pyproject.toml`` reads the version from ``faultload.__version__`` (its one place); the installed
    distribution says the same."""
    from importlib import metadata

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "faultload.__version__"}
    assert metadata.version("faultload") == faultload.__version__


class _RecordingGroup:
    def __init__(self) -> None:
        self.options: list[tuple[tuple[str, ...], dict]] = []

    def addoption(self, *names: str, **attrs) -> None:
        self.options.append((names, attrs))


class _RecordingParser:
    def __init__(self) -> None:
        self.group = _RecordingGroup()

    def getgroup(self, name: str, description: str = "") -> _RecordingGroup:
        return self.group


def test_every_plugin_option_has_a_help_line_that_shows_its_default():
    parser = _RecordingParser()
    plugin.pytest_addoption(parser)
    helps = {names[0]: attrs.get("help", "") for names, attrs in parser.group.options}
    assert helps and all(name.startswith("--faultload-") for name in helps)
    for name, text in helps.items():
        assert "default" in text, f"{name}: no default shown in {text!r}"
    assert f"default {DEFAULT_TARGET}" in helps["--faultload-target"]
    assert f"default {DEFAULT_PROFILE}" in helps["--faultload-profile"]


def test_every_replay_outcome_has_its_exit_code_and_a_harness_error_is_never_a_pass():
    from faultload.cli.exits import EXIT_OK, REPLAY_EXITS
    from faultload.store.outcomes import ReplayStatus

    assert set(REPLAY_EXITS) == set(ReplayStatus)
    assert [s for s, code in REPLAY_EXITS.items() if code == EXIT_OK] == [ReplayStatus.NOT_REPRODUCED]
