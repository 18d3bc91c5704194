"""What replaying a repro or re-judging a bundle came to, as values; the command line maps them to exit codes."""

from __future__ import annotations

import enum


class ReplayStatus(str, enum.Enum):
    """A repro's trial run again: its failure came back, or it did not, or the user stopped it."""

    REPRODUCED = "reproduced"  # failing again (a comparison: still worse, or a metric unmeasured)
    NOT_REPRODUCED = "not reproduced"  # the failure did not come back on a fresh stack (with a fix: the fix holds)
    HARNESS_ERROR = "harness error"  # the trial could not be run as asked: no verdict on the server either way
    INTERRUPTED = "interrupted"
