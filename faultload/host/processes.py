"""Child processes that cannot outlive the suite, and how an interrupt ends it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
from typing import Any, Iterator

import psutil  # loaded with this module, so a signal handler never imports it

from faultload.host import scratch
from faultload.host.signals import INTERRUPT_SIGNALS

_PR_SET_PDEATHSIG = 1

_RESOURCE_TRACKER = "multiprocessing.resource_tracker"


def child_environment(set_: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment a child process starts with: this process's, with ``set_`` added and ``drop`` removed.

    The one place below the edges that reads ``os.environ``: a child inherits the machine's environment
    (PATH, HOME, locale) as any program's would; faultload's own settings never travel through it.
    """
    env = {key: value for key, value in os.environ.items() if key not in drop}
    env.update(set_ or {})
    return env


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


def popen_tied(cmd: list[str], *, sig: int = signal.SIGKILL, tie: bool = True, **popen_kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(cmd, **popen_kwargs)`` started with Ctrl-C and hang-up blocked here (see
    :func:`terminal_signals_blocked`) and unblocked in the child before its exec; with ``tie`` the child
    also gets ``sig`` when this process dies (``prctl``, set from the main thread only: it follows the
    thread that forked)."""
    parent = os.getpid()

    def preexec() -> None:
        if tie:
            die_with_parent(parent, sig)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, TERMINAL_SIGNALS)

    with terminal_signals_blocked():
        return subprocess.Popen(cmd, preexec_fn=preexec, **popen_kwargs)


def ignore_terminal_signals() -> None:
    """In a child whose parent decides when it stops: a terminal's Ctrl-C and hang-up, sent to
    the whole foreground group, do not end it. SIGTERM still does: multiprocessing ends its
    daemonic children with it when the parent exits."""
    for sig in TERMINAL_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, TERMINAL_SIGNALS)  # blocked by a parent that spawned it so


TERMINAL_SIGNALS = frozenset({signal.SIGINT, signal.SIGHUP})


@contextlib.contextmanager
def terminal_signals_blocked() -> Iterator[None]:
    """Start children inside this. A Ctrl-C that lands while a ``preexec_fn`` fork runs Python's
    at-fork hooks in this process is swallowed there ("Exception ignored in ... _releaseLock"):
    2 of 10 runs interrupted as the server launched exited 0, not 130; blocked, it is delivered
    here on exit. The children start with them blocked: a load worker until
    :func:`ignore_terminal_signals` ignores them (a Ctrl-C during its imports killed it), a
    child of :func:`popen_tied` until its preexec unblocks them."""
    signal.pthread_sigmask(signal.SIG_BLOCK, TERMINAL_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, TERMINAL_SIGNALS)


def kill_descendants() -> int:
    """SIGKILL every process below this one, whatever its session (router, server, Toxiproxy,
    workers); return how many were signalled."""
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return 0
    killed = 0
    for child in children:
        try:
            # multiprocessing's resource tracker ends by itself when this process does
            # (its pipe closes); killed early, it is started again and complains.
            if _RESOURCE_TRACKER not in " ".join(child.cmdline()):
                child.kill()
                killed += 1
        except psutil.Error:
            pass
    return killed


def _say(text: str) -> None:
    """One line on stderr from a signal handler: a raw write, never the (maybe busy) sys.stderr."""
    try:
        os.write(2, f"{text}\n".encode())
    except OSError:
        pass


class Interrupts:
    """SIGINT, SIGTERM and SIGHUP alike, for a process that owns a stack.

    The first raises KeyboardInterrupt in the main thread: the caller's
    cleanup runs and its partial report is written. A second (the impatient
    Ctrl-C) SIGKILLs every descendant at once, so the rest of the cleanup
    meets dead processes and finishes in moments, removing temp dirs as usual;
    should it still run ``hard_exit_s`` later, the process removes the
    scratch folders it made (:mod:`faultload.host.scratch`) and exits with
    ``exit_code`` there and then. A signal ignored when :meth:`install` runs
    (``nohup``, a script's background job) stays ignored.
    """

    def __init__(self, exit_code: int, hard_exit_s: float = 3.0, name: str = "faultload") -> None:
        self.exit_code = exit_code
        self.hard_exit_s = hard_exit_s
        self.name = name
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}
        self._timer: threading.Timer | None = None

    def install(self) -> "Interrupts":
        for sig in INTERRUPT_SIGNALS:
            current = signal.getsignal(sig)
            if current is signal.SIG_IGN:
                continue
            self._previous[sig] = current
            signal.signal(sig, self._on_signal)
        return self

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        if self._timer is not None:
            self._timer.cancel()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.received.append(signum)
        name = signal.Signals(signum).name
        if len(self.received) == 1:
            _say(
                f"{self.name}: {name}: stopping everything it started and reporting what ran "
                "(Ctrl-C again to stop at once)"
            )
            raise KeyboardInterrupt
        if self._timer is None:
            killed = kill_descendants()
            _say(f"{self.name}: {name} again: killed {killed} child processes; exiting")
            self._timer = threading.Timer(self.hard_exit_s, self._exit_now)
            self._timer.daemon = True
            self._timer.start()
        else:
            kill_descendants()

    def _exit_now(self) -> None:
        kill_descendants()
        scratch.remove_all()
        _say(f"{self.name}: cleanup still running {self.hard_exit_s:.0f}s after the second interrupt; exited")
        os._exit(self.exit_code)
