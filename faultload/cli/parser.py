"""The ``faultload`` command line's parser: every subcommand, in --help's order, and the examples ``run`` ends with.

Kept apart from :mod:`faultload.cli.commands` (what each command does) so that
the parser — the CLI's face, its help and its one-line errors — reads on its
own. Each group of options is a module of its own: :mod:`~faultload.cli.load_options`,
:mod:`~faultload.cli.stack_options` (router and server), :mod:`~faultload.cli.output_options`,
:mod:`~faultload.cli.many_trials_options` (compare, matrix), :mod:`~faultload.cli.stored_trial_options`
(replay, check, shrink), on :mod:`~faultload.cli.parser_base` (the parser class, help formatter and value
types). Light imports only: :mod:`faultload.cli.main` imports it, and load workers
re-import that module in each process.
"""

from __future__ import annotations

import argparse

from faultload.cli.conformance_options import add_conformance_args
from faultload.cli.exits import epilog as exit_epilog
from faultload.cli.load_options import add_load_args
from faultload.cli.many_trials_options import add_compare_args, add_matrix_args
from faultload.cli.output_options import add_output_args
from faultload.cli.parser_base import WORKDIR_HELP, HelpFormatter, Parser, UsageError
from faultload.cli.stack_options import add_router_args, add_server_args
from faultload.cli.stored_trial_options import add_check_args, add_replay_args, add_shrink_args
from faultload.model.target import DEFAULT_TARGET
from faultload.setup import SETUP_SUMMARY
from faultload.version import installed_version as version

# What the rest of faultload, its tests, scripts and benches import from here.
__all__ = ["RUN_EXAMPLES", "UsageError", "build_parser", "version"]

# `faultload run --help` ends with these: each command works as typed (tests/repo/test_reference_docs.py parses them)
RUN_EXAMPLES = """\
examples:
  # a first trial, against the default target (faultload setup installs it)
  faultload setup
  faultload run --requests 2000 --json-out trial.json

  # a SkyRL checkout in ../SkyRL: its backend down for 0.5 s, one second into the load; the JSON report
  faultload setup --target skyrl@../SkyRL
  faultload run --target skyrl@../SkyRL --fault backend:down@1+0.5 --fatal-fault backend:down --json-out fault.json

  # the checkout against its release: the same trial 3 times on each, interleaved; the table as Markdown
  faultload compare --baseline skyrl==0.4.0 --candidate skyrl@../SkyRL --repeats 3 --markdown-out compare.md
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``faultload`` parser: ``--version`` and every subcommand with its options."""
    parser = Parser(
        prog="faultload",
        description="Fault-injection and load suite for Tinker-API servers",
        allow_abbrev=False,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"faultload {version()}")
    sub = _subcommands(parser)
    _add_trial_commands(sub)
    add_replay_args(sub.add_parser("replay", help="run a repro file's trial again on a fresh stack"))
    add_check_args(sub.add_parser("check", help="judge a stored trial bundle again, offline (run --bundle DIR)"))
    add_shrink_args(
        sub.add_parser(
            "shrink",
            help="reduce a failed trial to a smaller one that still fails, and write its repro for `faultload replay`",
        )
    )
    add_compare_args(sub.add_parser("compare", help="the same trial on two builds, interleaved: ratios with intervals"))
    add_matrix_args(
        sub.add_parser("matrix", help="run the suite over (target, regression) rows: caught or clean as expected?")
    )
    add_conformance_args(
        sub.add_parser("conformance", help="the same contract trials on each server family: which rule each keeps")
    )
    _add_install_commands(sub)
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    """The subcommands' action, whose ``add_parser`` gives each subcommand the parser's ways and the exit codes."""
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    sub_parser = sub.add_parser

    def add_parser(name: str, **kw):  # no prefix matching: `--request 10` must not mean --requests
        kw.setdefault("description", kw.get("help"))
        kw["epilog"] = (kw["epilog"].rstrip("\n") + "\n\n" if kw.get("epilog") else "") + exit_epilog()
        return sub_parser(name, allow_abbrev=False, formatter_class=HelpFormatter, **kw)

    sub.add_parser = add_parser
    return sub


def _add_trial_args(p: argparse.ArgumentParser) -> None:
    add_load_args(p)
    add_router_args(p)
    add_server_args(p)
    add_output_args(p)


def _add_trial_commands(sub: argparse._SubParsersAction) -> None:
    """run and confirm: one trial, confirm's at full size."""
    _add_trial_args(sub.add_parser("run", help="run one load trial and report it", epilog=RUN_EXAMPLES))
    confirm = sub.add_parser(
        "confirm",
        help="the full-size run (131,072 requests), fitted to this machine",
        description="the full-size run (131,072 requests), fitted to this machine: "
        "--max-outstanding 0 and --workers 0 (its defaults) are chosen by the preflight",
    )
    _add_trial_args(confirm)
    confirm.set_defaults(
        requests=131_072,
        router_mode="latency",
        max_num_seqs=256,
        gen_seconds=1.0,
        max_outstanding=0,
        workers=0,
    )


def _add_install_commands(sub: argparse._SubParsersAction) -> None:
    """setup and doctor: install the targets (and SDK releases), or check them."""
    for name, help_, verb in (
        ("setup", SETUP_SUMMARY, "install"),
        ("doctor", "check the machine and the installed parts", "check"),
    ):
        p = sub.add_parser(name, help=help_)
        p.add_argument(
            "--target",
            action="append",
            default=[],
            metavar="SPEC",
            help=f"a target to {verb} (repeatable; default {DEFAULT_TARGET})",
        )
        if name == "setup":
            p.add_argument(
                "--sdk",
                action="append",
                default=[],
                metavar="tinker==X.Y.Z",
                help="an SDK release for --client sdk --sdk, installed into a folder of its own "
                "(repeatable; default none)",
            )
        p.add_argument("--workdir", default=None, metavar="DIR", help=WORKDIR_HELP)
