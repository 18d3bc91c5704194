"""``faultload`` command line: run | confirm | check | replay | matrix | setup | doctor.

Exit codes: 0 all good, 1 a trial failed (requests lost/failed, or an
invariant violated), 2 bad usage or setup, 130 interrupted.

This module is the console script's: parse, then hand the command to
:mod:`faultload.cli.commands`. It stays light because every load worker is
a spawned process that re-runs the ``faultload`` script, and so imports this
module again (as ``__mp_main__``); what it imports at the top, every worker
pays for.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Sequence

from faultload.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from faultload.cli.options_file import parse_with_file
from faultload.cli.parser import UsageError, build_parser
from faultload.host.processes import Interrupts
from faultload.host.workspace import output_problems

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "UsageError", "main"]


def main(argv: Sequence[str] | None = None, environ: dict[str, str] | None = None) -> int:
    """Run one command; ``environ`` (default ``os.environ``) is read here only, and passed down as values."""
    environ = os.environ if environ is None else environ
    # SIGTERM (CI cancelling, `timeout`, kill) and SIGHUP (a closed terminal) take
    # the Ctrl-C path, so cleanup runs and the partial report is written; a
    # second one kills every child at once.
    interrupts = Interrupts(EXIT_INTERRUPTED).install()
    try:
        try:
            args = parse_with_file(build_parser(), argv, Path.cwd())
        except ValueError as exc:  # the settings file: one line naming the file, the table and the key
            raise UsageError(str(exc)) from None
        if args.options_file is not None:
            print(
                f"faultload: options from {args.options_file['path']} [tool.faultload.options.{args.command}]: "
                f"{', '.join(args.options_file['keys'])}",
                file=sys.stderr,
            )
        problem = output_problems(vars(args))  # every command's outputs, before any work
        if problem:
            raise UsageError(problem)
        args.home = environ.get("FAULTLOAD_HOME")  # the workspace when --workdir is not given
        args.env_api_key = environ.get("TINKER_API_KEY")  # a url= target's key when --api-key is not given
        args.go = environ.get("GO")  # a Go binary to build Toxiproxy, the router and the client with (setup, doctor)
        # --ray: the cluster `auto` names, and the path a loopback cluster's actors import faultload from
        args.ray_environ = {key: environ[key] for key in ("RAY_ADDRESS", "PYTHONPATH") if key in environ}
        # The commands and the trial machinery they run (~150 ms, ~400 modules) load here, not at the
        # top: spawned load workers re-import this module, and --help, --version and a usage error stay quick.
        from faultload.cli.commands import COMMANDS  # local import: spawned load workers re-import this module

        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"faultload: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # between the steps that catch it (parsing, judging, writing the report)
        print("faultload: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        interrupts.uninstall()


if __name__ == "__main__":
    sys.exit(main())
