"""The command line's exit codes, stated once (README, "Exit codes"): only the command line maps outcomes to them."""

from faultload.store.outcomes import ReplayStatus

EXIT_OK = 0  # every request completed and no invariant was violated (replay: the failure did not reproduce)
EXIT_FAILED = 1  # a trial ran and requests failed or were lost, an invariant was violated (replay: it reproduced)
EXIT_USAGE = 2  # bad usage or setup: one line naming what is wrong, nothing left running
EXIT_INTERRUPTED = 130  # interrupted (Ctrl-C, SIGTERM, SIGHUP): a partial report is printed and written

# faultload replay: its failure came back (1), did not (0: flaky, or a fix that holds), the harness could not
# run it as asked (1, as `faultload run` with a harness error: never a pass), or Ctrl-C (130)
REPLAY_EXITS = {ReplayStatus.REPRODUCED: EXIT_FAILED, ReplayStatus.FLAKY: EXIT_OK,
                ReplayStatus.HARNESS_ERROR: EXIT_FAILED, ReplayStatus.INTERRUPTED: EXIT_INTERRUPTED}
