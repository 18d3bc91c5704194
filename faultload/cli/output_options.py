"""A one-trial command's output options (run, confirm): the report files it writes, its workspace, the budgets and
faults it is judged by, and where its load workers run.

Apart from :mod:`faultload.cli.parser` so that each group of options reads on its own; compare's outputs differ
and are in :mod:`faultload.cli.many_trials_options`.
"""

from __future__ import annotations

import argparse

from faultload.cli.parser_base import WORKDIR_HELP


def add_output_args(p: argparse.ArgumentParser) -> None:
    """A one-trial command's output options, in --help's order."""
    _add_report_file_args(p)
    p.add_argument("--workdir", default=None, metavar="DIR", help=WORKDIR_HELP)
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    _add_judging_args(p)
    p.add_argument(
        "--ray",
        default=None,
        metavar="HOST:PORT",
        help="run the load workers as actors on this Ray cluster (auto: RAY_ADDRESS), spread over its "
        "nodes; needs the ray extra (default: local worker processes)",
    )


def _add_report_file_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json-out", default=None, metavar="PATH", help="write the JSON report (default: not written)")
    p.add_argument(
        "--junit-xml",
        default=None,
        metavar="PATH",
        help="write a JUnit XML report for CI: a test case for the trial (harness error: error) and one per "
        "invariant (violated: failure; unknown: skipped) (default: not written)",
    )
    p.add_argument(
        "--plot",
        default=None,
        metavar="PNG",
        help="draw the trial's timeline (default: none; confirm: beside the JSON)",
    )
    p.add_argument(
        "--html",
        default=None,
        metavar="PATH",
        help="write the trial's report as one self-contained HTML file that opens offline: timeline "
        "with fault windows, verdict table (default: not written)",
    )
    p.add_argument(
        "--history",
        default=None,
        metavar="NPZ",
        help="write the per-request history, compressed numpy (default: none; confirm: beside the JSON)",
    )
    p.add_argument(
        "--bundle",
        default=None,
        metavar="DIR",
        help="write the trial's bundle here, for `faultload check DIR` (default: not written)",
    )


def _add_judging_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one invariant budget, --config's or built in (repeatable; default none)",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="read [tool.faultload.*] from this TOML file: this command's options ([tool.faultload.options.run], "
        "[tool.faultload.options.confirm]; typed ones win), budgets, watchdog limits (default: the nearest "
        "pyproject.toml with a [tool.faultload] table, from here upward)",
    )
    p.add_argument(
        "--fatal-fault",
        action="append",
        default=[],
        metavar="KIND",
        help="fault kind whose victims may give up, e.g. router:crash (repeatable; default none)",
    )
    p.add_argument(
        "--no-early-stop",
        action="store_true",
        help="do not stop the trial on a recognised collapse (the verdict is still computed)",
    )
