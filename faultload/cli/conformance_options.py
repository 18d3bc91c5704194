"""The options of ``faultload conformance`` (its code is :mod:`faultload.cli.conformance`)."""

from __future__ import annotations

import argparse

from faultload.cli.parser_base import WORKDIR_HELP
from faultload.conformance.rules import RULE_NAMES
from faultload.model.target import DEFAULT_TARGET

DEFAULT_TIME_SCALE = 0.05  # the ci profile's: every timer of every contract, in minutes


def add_conformance_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--targets",
        default=DEFAULT_TARGET,
        metavar="A,B",
        help=f"the releases or checkouts to ask, in the table's column order (default {DEFAULT_TARGET})",
    )
    p.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="NAME",
        help="a candidate fix, applied to each target whose family has it, in every row but the session row "
        "(repeatable; default none)",
    )
    p.add_argument(
        "--rules", default=None, metavar="A,B", help=f"the rows to run (default all: {', '.join(RULE_NAMES)})"
    )
    p.add_argument(
        "--time-scale",
        type=float,
        default=DEFAULT_TIME_SCALE,
        metavar="S",
        help=f"every timer of the trials and the contracts times S (default {DEFAULT_TIME_SCALE:g})",
    )
    p.add_argument("--json-out", default=None, metavar="PATH", help="write faultload.conformance/1 (default: not)")
    p.add_argument("--markdown-out", default=None, metavar="PATH", help="write the table as Markdown (default: not)")
    p.add_argument("--html", default=None, metavar="PATH", help="write one self-contained HTML page (default: not)")
    p.add_argument(
        "--repros",
        default=None,
        metavar="DIR",
        help="where a broken cell's repro file goes (default the workdir's repros/)",
    )
    p.add_argument("--workdir", default=None, metavar="DIR", help=WORKDIR_HELP)
