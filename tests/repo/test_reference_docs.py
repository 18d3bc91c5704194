"""The reference pages (docs/reference/) are what ``scripts/reference.py`` makes of the code, and the check fails
when they are not; every option of every command has a help line; ``faultload run --help`` ends with examples
that work as typed."""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
from pathlib import Path

import pytest

from faultload.checker.contract.rules import Rule
from faultload.cli.from_args import config_from_args
from faultload.cli.parser import RUN_EXAMPLES, build_parser
from faultload.model.build import parse_build
from faultload.model.target import parse_target

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("reference", ROOT / "scripts" / "reference.py")
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)


def test_the_committed_pages_are_what_the_code_gives() -> None:
    stale = reference.stale(reference.OUT, reference.pages())
    assert not stale, (
        f"docs/reference/{', '.join(stale)} differ from the code: run `python scripts/reference.py` "
        "and commit the pages"
    )


def test_every_page_says_it_is_generated_and_names_no_path_of_this_machine() -> None:
    for name, text in reference.pages().items():
        assert text.splitlines()[0] == reference.HEADER and "python scripts/reference.py" in text.splitlines()[0]
        assert str(ROOT) not in text and "/tmp/" not in text, name


def _scratch_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    reference.subparsers(parser)["run"].add_argument("--scratch-option", help="an option no page has yet")
    return parser


@pytest.mark.parametrize(
    "change, page",
    [
        (lambda monkeypatch: monkeypatch.setattr(reference, "build_parser", _scratch_parser), "cli.md"),
        (
            lambda monkeypatch: monkeypatch.setattr(reference, "RULES", (*reference.RULES, Rule("scratch", "s", "w"))),
            "invariants.md",
        ),
    ],
)
def test_the_check_fails_naming_the_page_a_code_change_left_stale(
    change, page: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    assert reference.main(["--out", str(tmp_path)]) == 0
    assert reference.main(["--check", "--out", str(tmp_path)]) == 0
    before = (tmp_path / page).read_text(encoding="utf-8")
    change(monkeypatch)
    capsys.readouterr()
    assert reference.main(["--check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"reference: {tmp_path / page} is stale: run `python scripts/reference.py` to write it from the code"
    ]
    assert (tmp_path / page).read_text(encoding="utf-8") == before  # --check writes nothing
    assert reference.main(["--out", str(tmp_path)]) == 0 and reference.main(["--check", "--out", str(tmp_path)]) == 0


def test_an_invariant_whose_checker_states_no_figure_is_refused() -> None:
    def check_scratch(inputs, budgets):
        """Holds when nothing is wrong."""

    with pytest.raises(ValueError, match="scratch: .*states no 'Figure: ...'"):
        reference.docstring_figure("scratch", check_scratch)


def _without_help(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[str]:
    """Every subcommand and argument, at any depth, with no help line (hidden ones included)."""
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, command in action.choices.items():
                if not (helps.get(name) or "").strip():
                    missing.append(" ".join((parser.prog, *path, name)))
                missing += _without_help(command, (*path, name))
        elif not (action.help or "").strip() or action.help == argparse.SUPPRESS:
            missing.append(" ".join((parser.prog.split()[0], *path, "/".join(action.option_strings) or action.dest)))
    return missing


def test_every_option_of_every_command_has_a_help_line() -> None:
    assert _without_help(build_parser()) == []


def test_an_option_or_a_command_without_a_help_line_is_found() -> None:
    parser = build_parser()
    commands = reference.subparsers(parser)
    commands["check"].add_argument("--bare")
    commands["check"].add_argument("--hidden", help=argparse.SUPPRESS)
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    sub.add_parser("silent")
    assert _without_help(parser) == ["faultload check --bare", "faultload check --hidden", "faultload silent"]


def test_run_help_ends_with_three_examples_that_work_as_typed_then_the_exit_codes(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from faultload.cli.exits import epilog

    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.endswith(RUN_EXAMPLES.rstrip("\n") + "\n\n" + epilog() + "\n")
    title, body = RUN_EXAMPLES.split("\n", 1)
    examples = [[line.strip() for line in block.strip().splitlines()] for block in body.split("\n\n")]
    assert title == "examples:" and len(examples) == 3
    for lines in examples:  # what it shows, then the commands
        assert lines[0].startswith("# ") and all(line.startswith("faultload ") for line in lines[1:]), lines
    checkout = tmp_path / "SkyRL"  # the checkout the examples name (its pyproject at the root), beside the work folder
    checkout.mkdir(parents=True)
    (checkout / "pyproject.toml").write_text('[project]\nname = "skyrl"\n')
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    commands = [line for lines in examples for line in lines[1:]]
    assert {shlex.split(c)[1] for c in commands} == {"setup", "run", "compare"}
    for command in commands:
        args = build_parser().parse_args(shlex.split(command)[1:])
        if args.command == "run":
            args.home = None
            config_from_args(args)  # every value checked as `faultload run` checks it before it starts
        targets = (
            [parse_build(args.baseline).target, parse_build(args.candidate).target]
            if args.command == "compare"
            else args.target
            if args.command == "setup"
            else [args.target]
        )
        for target in targets:
            parse_target(target)  # a checkout's folder must exist


def test_the_script_runs_as_a_script(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "reference.py"), "--check", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "cli.md is missing" in done.stderr
