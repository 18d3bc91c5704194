"""The options of the commands that run many trials (compare, matrix; their code is :mod:`faultload.cli.many_trials`).

compare takes the one-trial load and stack options, but names two builds, and writes its own outputs; matrix runs
the suite over rows. Apart from :mod:`faultload.cli.parser` so that each group of options reads on its own.
"""

from __future__ import annotations

import argparse

from faultload.cli.load_options import add_load_args
from faultload.cli.parser_base import WORKDIR_HELP, integer, positive_int, seconds
from faultload.cli.stack_options import add_router_args, add_server_args
from faultload.matrix.rows import DEFAULT_ROWS


def add_compare_args(p: argparse.ArgumentParser) -> None:
    """compare's options, in --help's order: the two builds, the trial's load and stack, the outputs, the judging."""
    build_help = (
        "a build: a target plus switches, e.g. skyrl==0.4.0, skyrl==0.4.0+regress=rich-access-log, "
        "skyrl@PATH+fix=NAME (required; no default)"
    )
    p.add_argument("--baseline", required=True, metavar="BUILD", help=build_help)
    p.add_argument("--candidate", required=True, metavar="BUILD", help=build_help)
    p.add_argument("--repeats", type=integer, metavar="N", default=5, help="trials per build, run in ABBA order")
    add_load_args(p, build=False)
    add_router_args(p)
    add_server_args(p, build=False)
    _add_compare_output_args(p)
    _add_compare_judging_args(p)


def _add_compare_output_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json-out", default=None, metavar="PATH", help="write the result, faultload.compare/1 (default: not written)"
    )
    p.add_argument(
        "--junit-xml",
        default=None,
        metavar="PATH",
        help="write a JUnit XML report for CI: a test case per metric (worse: failure; unknown: skipped) "
        "and per trial (failed to run: error) (default: not written)",
    )
    p.add_argument(
        "--markdown-out", default=None, metavar="PATH", help="write the table as Markdown (default: not written)"
    )
    p.add_argument(
        "--html",
        default=None,
        metavar="PATH",
        help="write the comparison as one self-contained HTML file that opens offline: the ratios with "
        "their intervals against the thresholds, the table, each side's trials (default: not written)",
    )
    p.add_argument(
        "--plot", default=None, metavar="PNG", help="draw both sides' timelines and the ratios (default: none)"
    )
    p.add_argument(
        "--trials-out", default=None, metavar="DIR", help="write each trial's JSON report here (default: not written)"
    )
    p.add_argument("--workdir", default=None, metavar="DIR", help=WORKDIR_HELP)
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def _add_compare_judging_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one invariant budget the trials are judged by (repeatable; default none)",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="read [tool.faultload.*] from this TOML file: this command's options "
        "([tool.faultload.options.compare]; typed ones win), compare thresholds, budgets (default: "
        "the nearest pyproject.toml with a [tool.faultload] table)",
    )
    p.add_argument(
        "--fatal-fault",
        action="append",
        default=[],
        metavar="KIND",
        help="fault kind whose victims may give up, e.g. router:crash (repeatable; default none)",
    )
    p.add_argument("--no-early-stop", action="store_true", help="do not stop a trial on a recognised collapse")


def add_matrix_args(matrix: argparse.ArgumentParser) -> None:
    """matrix's options, in --help's order: which rows and how long, the outputs, where the rows run."""
    matrix.add_argument("--profile", default="ci", choices=("ci", "nightly"), help="the suite profile for every row")
    matrix.add_argument(
        "--rows",
        default=None,
        metavar="A,B",
        help=f"rows to run, in order (default all: {', '.join(row.name for row in DEFAULT_ROWS)})",
    )
    matrix.add_argument(
        "--all-properties", action="store_true", help="run every property of a row, not only up to its first failure"
    )
    matrix.add_argument(
        "--session-s",
        default=None,
        type=seconds,
        metavar="S",
        help="each row's session starts no trial after S seconds (default: the profile's); "
        "a row left with too few judged trials is 'error: not judged'",
    )
    _add_matrix_output_args(matrix)
    matrix.add_argument(
        "--ray",
        default=None,
        metavar="HOST:PORT",
        help="spread the rows over this Ray cluster's nodes, one row per node at a time (auto: "
        "RAY_ADDRESS); every node must have this faultload and its workspace (default: one "
        "row after another here)",
    )
    matrix.add_argument("--allow-remote", action="store_true", help="allow a --ray cluster off loopback")
    matrix.add_argument(
        "--jobs",
        default=1,
        type=positive_int,
        metavar="N",
        help="up to N rows at once on this machine (a ci row mostly waits on its timers); a comparison row "
        "always runs with nothing beside it",
    )
    matrix.add_argument(
        "--logs",
        default=None,
        metavar="DIR",
        help="where each row's pytest log and summary go (default .faultload/matrix/TIME)",
    )


def _add_matrix_output_args(matrix: argparse.ArgumentParser) -> None:
    matrix.add_argument(
        "--json-out", default=None, metavar="PATH", help="write the result, faultload.matrix/1 (default: not written)"
    )
    matrix.add_argument(
        "--junit-xml",
        default=None,
        metavar="PATH",
        help="write a JUnit XML report for CI: a test case per row (not as expected: failure; error, "
        "not judged included: error) and per invariant of a row (not judged: skipped) "
        "(default: not written)",
    )
    matrix.add_argument(
        "--markdown-out",
        default=None,
        metavar="PATH",
        help="write the table as Markdown, the README's (default: not written)",
    )
    matrix.add_argument(
        "--html",
        default=None,
        metavar="PATH",
        help="write the matrix as one self-contained HTML file that opens offline: each row's "
        "expected and actual result, repro and wall time, the rows x invariants grid "
        "(default: not written)",
    )
