"""A trial on a shared stack reads the router's completions of its own load only.

The suite's trials share one router; a comparison runs the same example (the same seed, so the same
nonces) several times on it, back to back. The completion log is the router's own files
(:class:`~faultload.router.completions.CompletionLog`, written here for real); the router itself is a
TEST DOUBLE that reads them as :class:`~faultload.router.handle.RouterHandle` does.
"""

from __future__ import annotations

import os
import struct

from faultload.router.completions import read_completions, repeated_completions
from faultload.run.gather import load_completions


class LoggedRouter:
    """TEST DOUBLE of RouterHandle: its completions are read from a real completion-log folder."""

    def __init__(self, directory) -> None:
        self.directory = directory

    def completions(self, since_epoch: float = 0.0) -> dict[int, float]:
        return read_completions(self.directory, since_epoch)

    def repeated_completions(self, since_epoch: float = 0.0) -> dict[int, int]:
        return repeated_completions(self.directory, since_epoch)


def _log(directory, records) -> None:
    """Records as the router writes them: (nonce, wall-clock epoch), 16 little-endian bytes each."""
    with open(os.path.join(directory, "completions-1.bin"), "ab") as out:
        for nonce, epoch in records:
            out.write(struct.pack("<qd", nonce, epoch))


def test_a_previous_trials_completion_of_the_same_nonce_just_before_the_load_is_not_this_trials(tmp_path):
    start = 1_000_000.0
    # the previous trial on this stack completed nonce 7 0.9 s before this load began (a comparison's repeat)
    _log(tmp_path, [(7, start - 0.9), (8, start - 5.0), (7, start + 4.0), (8, start + 4.5)])
    completed, repeats = load_completions(LoggedRouter(tmp_path), start)
    assert completed == {7: 4.0, 8: 4.5}  # this load's own completions, not the previous trial's
    assert repeats == {}  # each completed once in this load: none forwarded twice


def test_a_nonce_completed_twice_in_this_load_is_counted_as_repeated(tmp_path):
    start = 50.0
    _log(tmp_path, [(3, start + 1.0), (3, start + 2.0), (4, start + 1.5)])
    completed, repeats = load_completions(LoggedRouter(tmp_path), start)
    assert completed == {3: 1.0, 4: 1.5} and repeats == {3: 2}
