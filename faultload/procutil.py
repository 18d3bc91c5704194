"""Child processes that cannot outlive the suite."""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL) -> None:
    """preexec: have the kernel send ``sig`` to this child when the parent dies (Linux),
    or exit at once if the parent is already gone.

    The signal follows the *thread* that forked the child, so start children
    from the main thread.
    """
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:
        os._exit(1)


def tied_to_this_process(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` that ties the child's life to the calling process."""
    parent = os.getpid()
    return lambda: die_with_parent(parent, sig)
