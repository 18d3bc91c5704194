"""The command line's exit codes and what each means, stated once: only the command line maps outcomes to them."""

from faultload.store.outcomes import ReplayStatus

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_HARNESS = 3  # pytest's own 3 (an internal error) is the rig's failure too: the suite uses the same code
EXIT_INTERRUPTED = 130

# What each code means, per command where they differ (docs/reference/cli.md is generated from it).
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "every request completed and no invariant was violated (run, confirm, check); nothing worse and "
    "nothing unknown (compare); every row run as expected, a row the profile cannot judge skipped (matrix); the failure did not reproduce (replay); "
    "the source violated nothing, so there was nothing to shrink (shrink); "
    "everything installed (setup); every check passed (doctor)",
    EXIT_FAILED: "the server is at fault: an invariant was violated, or requests failed or were lost (run, "
    "confirm, check); a metric worse or unknown (compare); a row not as expected (matrix); the "
    "failure reproduced (replay); the failure stands and its shrunk repro was written (shrink); "
    "pytest: a property failed",
    EXIT_USAGE: "bad usage or setup: one line naming what is wrong, nothing left running (setup: what could not "
    "be installed; doctor: a check failed)",
    EXIT_HARNESS: "the harness failed, not the server: a load worker crashed, a fault could not be applied or "
    "healed, a trial could not be run as asked (its verdicts, if any, are in the report but are not "
    "the server's); the report's harness error names "
    "the part (run, confirm, replay); a trial of a comparison failed to run (compare); a row not "
    "judged (matrix); pytest: a property stopped by a harness error, reported as an error",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGTERM, SIGHUP): a partial report is printed and written",
}

# `pytest faultload` (the suite): the same 0, 1 and 3; pytest's own codes for bad usage and an interrupt.
PYTEST_INTERRUPTED = 2
PYTEST_USAGE = 4
SUITE_EXIT_CODES: dict[int, str] = {
    EXIT_OK: "every property held on every trial it judged, and judged at least one",
    EXIT_FAILED: "the server is at fault: a property failed (with a base: a violation new to the head)",
    PYTEST_INTERRUPTED: "interrupted (pytest's code)",
    EXIT_HARNESS: "the harness failed, not the server: a property stopped by a harness error (retry it)",
    PYTEST_USAGE: "bad usage (pytest's code): one line naming what is wrong",
}

# faultload replay: its failure came back (1), did not (0: not reproduced, or a fix that holds), the harness could not
# run it as asked (3, as `faultload run` with a harness error: never a pass), or Ctrl-C (130)
REPLAY_EXITS = {
    ReplayStatus.REPRODUCED: EXIT_FAILED,
    ReplayStatus.NOT_REPRODUCED: EXIT_OK,
    ReplayStatus.HARNESS_ERROR: EXIT_HARNESS,
    ReplayStatus.INTERRUPTED: EXIT_INTERRUPTED,
}


def trial_exit(violated: bool, harness_error: bool, incomplete: bool) -> int:
    """A trial's code: a harness failure makes it the rig's (3), whatever its verdicts say (a load worker that
    died leaves the server holding work for requests nobody polls: what that looks like is not the server's
    verdict; the suite calls such a trial a harness error too); else a violation, or requests not completed,
    are the server's (1)."""
    if harness_error:
        return EXIT_HARNESS
    return EXIT_FAILED if violated or incomplete else EXIT_OK


def epilog() -> str:
    """The exit codes, for every command's --help."""
    return "exit codes:\n" + "\n".join(
        f"  {code:<4}{short}"
        for code, short in (
            (EXIT_OK, "clean"),
            (EXIT_FAILED, "the server is at fault (a violation, a loss, a worse metric)"),
            (EXIT_USAGE, "bad usage or setup: one line, nothing started"),
            (EXIT_HARNESS, "the harness failed, not the server"),
            (EXIT_INTERRUPTED, "interrupted"),
        )
    )


def matrix_exit(rows: list[dict]) -> int:
    """A matrix's code: a row that ran and came out other than expected is a finding (1); otherwise a row
    that could not be judged is the rig's (3)."""
    if any(not row["as_expected"] and row["result"] != "error" for row in rows):
        return EXIT_FAILED
    return EXIT_HARNESS if any(not row["as_expected"] for row in rows) else EXIT_OK


def compare_exit(result: dict) -> int:
    """A comparison's code: a metric worse is the candidate's (1); a trial that failed to run is the rig's (3);
    a metric left unknown otherwise is never a pass (1)."""
    if result["worse"]:
        return EXIT_FAILED
    if any(trial.get("error") for trial in result.get("trials", [])):
        return EXIT_HARNESS
    return EXIT_OK if result["ok"] else EXIT_FAILED
