"""``faultload conformance``: the same contract trials on each family, one table of which rule each keeps.

Its rows and trials are :mod:`faultload.conformance.rules`, run and judged by :mod:`faultload.conformance.run`,
written by :mod:`faultload.conformance.table`; its options are :mod:`faultload.cli.conformance_options`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from faultload.cli.exits import EXIT_FAILED, EXIT_HARNESS, EXIT_INTERRUPTED, EXIT_OK
from faultload.cli.from_args import workspace_of
from faultload.cli.parser import UsageError
from faultload.conformance import table as table_mod
from faultload.conformance.run import BROKEN, HARNESS, check_arguments, run_conformance


def cmd_conformance(args: argparse.Namespace) -> int:
    """0 when every cell is kept or not applicable, 1 when one is broken or not judged, 3 on a harness error."""
    targets = tuple(t.strip() for t in args.targets.split(",") if t.strip())
    rules = tuple(r.strip() for r in (args.rules or "").split(",") if r.strip())
    try:
        check_arguments(targets, tuple(args.fix), rules)
        if not 0 < args.time_scale <= 1:
            raise ValueError(f"--time-scale: {args.time_scale:g} is not in (0, 1]")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    workspace = workspace_of(args)
    repros = Path(args.repros) if args.repros else workspace.repros

    def log(line: str) -> None:
        print(f"faultload conformance: {line}", file=sys.stderr, flush=True)

    try:
        table = run_conformance(targets, tuple(args.fix), args.time_scale, workspace, repros, rules, log)
    except KeyboardInterrupt:
        print("faultload: interrupted; every trial's stack stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(table_mod.markdown(table))
    table_mod.write(
        table,
        Path(args.json_out) if args.json_out else None,
        Path(args.markdown_out) if args.markdown_out else None,
        Path(args.html) if args.html else None,
    )
    statuses = {cell.status for cell in table.cells}
    if HARNESS in statuses:
        return EXIT_HARNESS
    return EXIT_FAILED if statuses - {"kept", "not applicable"} or BROKEN in statuses else EXIT_OK
