"""The options of the commands that start from a trial already run: replay (a repro), check (a bundle), shrink
(a failed trial).

Apart from :mod:`faultload.cli.parser` so that each group of options reads on its own.
"""

from __future__ import annotations

import argparse

from faultload.cli.parser_base import WORKDIR_HELP, positive_int, seconds, whole_number
from faultload.model.switches import FIXES


def add_replay_args(replay: argparse.ArgumentParser) -> None:
    """replay's repro and options, in --help's order."""
    replay.add_argument(
        "file",
        metavar="FILE",
        help="a repro JSON written by the suite (pytest --pyargs faultload.suite) or `faultload shrink`; or a property's name "
        "(test_no_lost_results: its newest repro in the workspace); or the name of a finding's "
        "repro faultload ships (half_open_delivery-0.4.0)",
    )
    replay.add_argument(
        "--json-out",
        default=None,
        metavar="PATH",
        help="write the replayed trial's JSON report; with --repeats N, one per run, "
        "PATH's stem + -1 .. -N (default: not written)",
    )
    replay.add_argument(
        "--html",
        default=None,
        metavar="PATH",
        help="write the replayed trial's report as one HTML page (a comparison's: its table); with "
        "--repeats N, one per run, as --json-out (default: not written)",
    )
    replay.add_argument(
        "--repeats",
        type=positive_int,
        default=1,
        metavar="N",
        help="run it N times, each on a fresh stack, and say how many reproduced it: exit 1 if any did",
    )
    replay.add_argument(
        "--target",
        default=None,
        metavar="SPEC",
        help="replay against this build instead of the repro's, e.g. a fixed checkout: skyrl@PATH "
        "(default: the repro's)",
    )
    replay.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="NAME",
        help=f"apply a candidate fix in the launched server: {', '.join(FIXES)} (repeatable; default none)",
    )
    replay.add_argument("--workdir", default=None, metavar="DIR", help=WORKDIR_HELP)


def add_shrink_args(shrink: argparse.ArgumentParser) -> None:
    """shrink's source and options, in --help's order."""
    shrink.add_argument(
        "source",
        metavar="SOURCE",
        help="the failed trial: a bundle (run --bundle DIR), a JSON report (run --json-out) or a repro",
    )
    shrink.add_argument(
        "--max-trials",
        type=whole_number,
        metavar="N",
        default=20,
        help="run at most N reduction trials, each on a fresh stack",
    )
    shrink.add_argument(
        "--time-limit", type=seconds, metavar="S", default=1800.0, help="start no reduction trial after S seconds"
    )
    shrink.add_argument(
        "--out", default=None, metavar="DIR", help="where the repro goes (default: the workspace's repros folder)"
    )
    shrink.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one budget the trials are judged by (repeatable; default: the source's, "
        "else the nearest pyproject.toml's)",
    )
    shrink.add_argument(
        "--config",
        default=None,
        metavar="PYPROJECT",
        help="read [tool.faultload.budgets] from this file when the source keeps no budgets "
        "(a JSON report; default: the nearest pyproject.toml with a [tool.faultload] table)",
    )
    shrink.add_argument("--workdir", default=None, metavar="DIR", help=WORKDIR_HELP)
    shrink.add_argument("--quiet", action="store_true", help="no progress lines")


def add_check_args(check: argparse.ArgumentParser) -> None:
    """check's bundle and options, in --help's order."""
    check.add_argument(
        "bundle", metavar="BUNDLE", help="a trial bundle: `faultload run --bundle DIR`, or beside a suite repro"
    )
    check.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one of the bundle's budgets (repeatable; default: judge with the stored budgets)",
    )
    check.add_argument(
        "--json-out",
        default=None,
        metavar="PATH",
        help="write the verdicts and the budgets used as JSON (default: not written)",
    )
