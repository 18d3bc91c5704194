"""Pause processes with SIGSTOP and make sure they always run again, even if faultload dies.

A stopped process acts on no signal but SIGKILL and SIGCONT: the SIGTERM a
router gets as its parent-death signal stays pending while it is stopped, so
a router paused when faultload is SIGKILLed would stay stopped for ever. Each
pause therefore starts a *resumer* first: a tiny process in its own session,
tied to nothing, that holds the read end of a pipe from this process. It
SIGCONTs the paused pids when the pipe reaches EOF without a "dismissed" byte
(this process died, however), when it is signalled, or when its own deadline
passes (the pause's length plus a margin: a hung faultload still resumes), and
then exits. The resumer is started before the SIGSTOP, so there is no moment
when a process is stopped and nothing would resume it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Callable

# The resumer, run as ``python -c``: argv = [deadline seconds, pid, ...]. Standard library only.
_RESUMER = """
import os, select, signal, sys
def resume(*_):
    for pid in sys.argv[2:]:
        try:
            os.kill(int(pid), signal.SIGCONT)
        except OSError:
            pass
    os._exit(0)
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, resume)
try:
    ready, _, _ = select.select([0], [], [], float(sys.argv[1]))
    if ready and os.read(0, 1) == b"d":
        os._exit(0)
finally:
    resume()
"""
RESUMER_MARGIN_S = 30.0  # past the pause's own end, the resumer resumes on its own
_REAP_S = 5.0


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class Pauser:
    """SIGSTOP/SIGCONT one target's processes (``pids()`` at pause time), nested pauses counted.

    The first :meth:`pause` stops the processes, the matching last :meth:`resume`
    continues them; every pause has its resumer, dismissed once all resumed.
    """

    def __init__(self, pids: Callable[[], list[int]], name: str, margin_s: float = RESUMER_MARGIN_S) -> None:
        self._pids = pids
        self.name = name
        self.margin_s = margin_s
        self._paused: list[int] = []
        self._depth = 0
        self._resumers: list[subprocess.Popen[bytes]] = []

    @property
    def paused(self) -> bool:
        return self._depth > 0

    def pause(self, seconds: float) -> list[int]:
        """Stop the processes (resumed at the latest ``seconds`` + margin later); returns the pids stopped."""
        pids = [p for p in self._pids() if p > 0]
        if not pids:
            raise RuntimeError(f"{self.name}: no process to pause")
        deadline = max(0.0, seconds) + self.margin_s
        resumer = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _RESUMER, repr(deadline), *map(str, pids)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._resumers.append(resumer)
        self._depth += 1
        self._paused = sorted(set(self._paused) | set(pids))
        _signal_all(pids, signal.SIGSTOP)
        return pids

    def resume(self) -> None:
        """End one pause; the last one SIGCONTs every paused process and dismisses the resumers."""
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth:
            return
        _signal_all(self._paused, signal.SIGCONT)
        self._paused = []
        resumers, self._resumers = self._resumers, []
        for resumer in resumers:
            try:
                assert resumer.stdin is not None
                resumer.stdin.write(b"d")
                resumer.stdin.close()
            except OSError:  # it is gone already: it resumed on its own
                pass
        for resumer in resumers:
            try:
                resumer.wait(_REAP_S)
            except subprocess.TimeoutExpired:
                resumer.kill()

    def resume_all(self) -> None:
        """End every pause at once (healing)."""
        while self._depth:
            self.resume()
