"""Every output option of every command is tried before any work: a folder that cannot be written is one line,
exit 2, and the command never starts (no stack, no trial).

In-process through ``faultload.cli.main.main``, with the commands replaced by a test double that fails the
test if called: what is checked is that nothing past the check runs.
"""

from __future__ import annotations

import argparse

import pytest

from faultload.cli import commands
from faultload.cli.main import main
from faultload.cli.parser import build_parser
from faultload.host.workspace import OUTPUT_OPTIONS, output_folder_problem

# What each command needs besides the option under test to get past its parser.
REQUIRED = {
    "replay": ["repro.json"],
    "shrink": ["bundle"],
    "check": ["bundle"],
    "compare": ["--baseline", "skyrl==0.4.0", "--candidate", "skyrl==0.4.0"],
}
WRITES = ("PATH", "PNG", "NPZ", "DIR")  # metavars of options that name something written (or a folder filled)
NOT_OUTPUTS = {"workdir"}  # made when missing, by design (setup makes it)


def _commands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


CASES = [
    (name, action.option_strings[-1], action.dest)
    for name, parser in _commands().items()
    for action in parser._actions
    if action.dest in OUTPUT_OPTIONS and action.option_strings
]


def test_every_option_that_writes_is_checked() -> None:
    named = {
        action.dest
        for parser in _commands().values()
        for action in parser._actions
        if action.metavar in WRITES and action.option_strings
    } - NOT_OUTPUTS
    assert named <= set(OUTPUT_OPTIONS), named - set(OUTPUT_OPTIONS)
    assert {name for name, _, _ in CASES} >= {"run", "confirm", "compare", "matrix", "replay", "shrink", "check"}


@pytest.mark.parametrize(("command", "option", "dest"), CASES, ids=[f"{c}{o}" for c, o, _ in CASES])
def test_an_output_that_cannot_be_written_stops_the_command_before_it_starts(
    command, option, dest, monkeypatch, capsys
) -> None:
    def must_not_run(args):
        raise AssertionError(f"{command} ran with {option} unwritable")

    monkeypatch.setattr(commands, "COMMANDS", {name: must_not_run for name in commands.COMMANDS})
    assert main([command, *REQUIRED.get(command, []), option, "/proc/x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"faultload: error: {option}: directory not writable: /proc (No such file or directory)"]


def test_a_writable_folder_passes_and_leaves_no_probe_behind(tmp_path) -> None:
    assert output_folder_problem(tmp_path / "report.json") is None
    assert output_folder_problem(tmp_path / "new-bundle", "dir") is None
    assert output_folder_problem(tmp_path, "dir") is None
    assert list(tmp_path.iterdir()) == []
    assert output_folder_problem(tmp_path) == f"is a directory: {tmp_path}"
    assert output_folder_problem(tmp_path / "missing" / "r.json") == f"no such directory: {tmp_path / 'missing'}"


def test_a_write_that_fails_after_the_trial_is_kept_in_the_workspace_and_said(tmp_path, capsys) -> None:
    from faultload.host.workspace import Workspace

    keep = commands._Keeper(Workspace(tmp_path / "home"))
    gone = tmp_path / "gone" / "report.json"  # its folder went away after the check
    kept = keep(lambda path: open(path, "w").write("{}"), str(gone))
    assert open(kept).read() == "{}" and kept.startswith(str(tmp_path / "home" / "runs"))
    assert capsys.readouterr().err.strip() == (
        f"faultload: could not write {gone} (No such file or directory); written to {kept} instead"
    )
    assert keep(lambda path: open(path, "w").write("{}"), str(tmp_path / "fine.json")) == str(tmp_path / "fine.json")
