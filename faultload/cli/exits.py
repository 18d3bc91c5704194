"""The command line's exit codes and what each means, stated once: only the command line maps outcomes to them."""

from faultload.store.outcomes import ReplayStatus

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# What each code means, per command where they differ (docs/reference/cli.md is generated from it).
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "every request completed and no invariant was violated (run, confirm, check); nothing worse and "
             "nothing unknown (compare); every row as expected (matrix); the failure did not reproduce (replay); "
             "the source violated nothing, so there was nothing to shrink (shrink); "
             "everything installed (setup); every check passed (doctor)",
    EXIT_FAILED: "a trial ran and requests failed or were lost, an invariant was violated or a load worker crashed "
                 "(run, confirm, check); a metric worse or unknown (compare); a row not as expected (matrix); the "
                 "failure reproduced, or the harness could not run it as asked (replay); the failure stands and its "
                 "shrunk repro was written (shrink)",
    EXIT_USAGE: "bad usage or setup: one line naming what is wrong, nothing left running (setup: what could not "
                "be installed; doctor: a check failed)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGTERM, SIGHUP): a partial report is printed and written",
}

# faultload replay: its failure came back (1), did not (0: flaky, or a fix that holds), the harness could not
# run it as asked (1, as `faultload run` with a harness error: never a pass), or Ctrl-C (130)
REPLAY_EXITS = {ReplayStatus.REPRODUCED: EXIT_FAILED, ReplayStatus.FLAKY: EXIT_OK,
                ReplayStatus.HARNESS_ERROR: EXIT_FAILED, ReplayStatus.INTERRUPTED: EXIT_INTERRUPTED}
