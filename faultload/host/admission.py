"""Trials side by side on one machine: up to N at once, and a trial that needs the machine with nothing beside it.

Every process that runs trials in one workspace — the suite's lanes (its pytest-xdist workers), a matrix's rows,
each a session of its own — takes its turn here, so the one rule holds across all of them: a trial *beside*
others takes one of ``slots`` slots; a trial *alone* takes every slot. The slots are files under the workspace
locked with ``flock``: the kernel drops a dead process's locks, so a killed session never leaves the machine
held. A turnstile lock gives the alone trial its turn: while it waits for the running trials to end, no new
trial starts beside them.

Each holder writes what it runs into its slot's ``.who`` file, so a trial can say what ran beside it (the
session's log shows it). Waits are bounded: past ``timeout_s`` an :class:`AdmissionTimeout` says who held the
machine.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

POLL_S = 0.05  # a waiting trial tries again this often (flock cannot wait on any one of several files)


class AdmissionTimeout(RuntimeError):
    """The machine stayed held past the wait's bound."""


class Admission:
    """The machine's slots for trials: :meth:`beside` takes one, :meth:`share` several, :meth:`alone` all."""

    def __init__(self, folder: Path, slots: int, timeout_s: float = 3600.0) -> None:
        if slots < 1:
            raise ValueError(f"admission needs at least one slot, not {slots}")
        self.folder = folder
        self.slots = slots
        self.timeout_s = timeout_s
        self._held: list[int] = []  # fds of the slot files this process holds now
        folder.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ taking turns

    @contextmanager
    def beside(self, label: str) -> Iterator[list[str]]:
        """Hold one slot while the block runs; yields what the other slots run as it starts."""
        self._not_nested()
        deadline = time.monotonic() + self.timeout_s
        while True:
            with self._turnstile(deadline):
                for index in range(self.slots):
                    fd = self._try(index)
                    if fd is not None:
                        break
                else:
                    fd = None
            if fd is not None:
                break
            self._wait(deadline, "a free slot")
        try:
            self._held = [fd]
            self._write_who(index, label)
            yield self.running(exclude=index)
            self._write_who(index, "")
        finally:
            self._release()

    @contextmanager
    def alone(self, label: str) -> Iterator[None]:
        """Hold every slot while the block runs: nothing runs beside it (every slot file present, not only
        ``slots``: another session may count more)."""
        self._not_nested()
        deadline = time.monotonic() + self.timeout_s
        try:
            with self._turnstile(deadline):
                for index in range(max(self.slots, self._slot_files())):
                    self._held.append(self._take(index, deadline))
            for index in range(len(self._held)):
                self._write_who(index, f"{label} (alone)")
            yield
            for index in range(len(self._held)):
                self._write_who(index, "")
        finally:
            self._release()

    @contextmanager
    def share(self, label: str, count: int) -> Iterator[list[str]]:
        """Hold ``count`` slots while the block runs (a trial whose load weighs as that many; at least one, at most
        every slot: then it is :meth:`alone`); yields what the other slots run as it starts. It waits for them as
        :meth:`alone` does, holding the turnstile, so no trial starts beside it while it gathers them."""
        if count >= self.slots:
            with self.alone(label):
                yield []
            return
        self._not_nested()
        deadline = time.monotonic() + self.timeout_s
        taken: list[int] = []
        try:
            with self._turnstile(deadline):
                while len(taken) < count:
                    for index in range(self.slots):
                        if index in taken or len(taken) == count:
                            continue
                        fd = self._try(index)
                        if fd is not None:
                            self._held.append(fd)
                            taken.append(index)
                    if len(taken) < count:
                        self._wait(deadline, f"{count} slots")
            for index in taken:
                self._write_who(index, f"{label} ({count} slots)")
            yield [who for who in self.running() if not who.startswith(f"{label} (")]
            for index in taken:
                self._write_who(index, "")
        finally:
            self._release()

    def running(self, exclude: int | None = None) -> list[str]:
        """What the held slots run now (their ``.who`` lines), this process's own left out."""
        found = []
        for index in range(self._slot_files()):
            if index == exclude:
                continue
            fd = self._try(index)
            if fd is not None:  # free: nothing runs there
                self._unlock(fd)
                continue
            who = self._who_path(index)
            text = who.read_text().strip() if who.exists() else ""
            found.append(text or "a trial")
        return found

    # ------------------------------------------------------------------ the files

    def _slot_path(self, index: int) -> Path:
        return self.folder / f"slot-{index}.lock"

    def _who_path(self, index: int) -> Path:
        return self.folder / f"slot-{index}.who"

    def _slot_files(self) -> int:
        """How many slot files exist (the highest index + 1)."""
        indices = [int(p.stem.split("-")[1]) for p in self.folder.glob("slot-*.lock") if p.stem.split("-")[1].isdigit()]
        return max(indices, default=-1) + 1

    def _open(self, path: Path) -> int:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def _try(self, index: int) -> int | None:
        """The slot's fd, locked, or None when another holds it."""
        fd = self._open(self._slot_path(index))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    def _take(self, index: int, deadline: float) -> int:
        while True:
            fd = self._try(index)
            if fd is not None:
                return fd
            self._wait(deadline, f"slot {index}")

    @contextmanager
    def _turnstile(self, deadline: float) -> Iterator[None]:
        fd = self._open(self.folder / "turnstile.lock")
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    self._wait(deadline, "the turnstile")
            yield
        finally:
            os.close(fd)  # closing the file description drops its lock

    def _wait(self, deadline: float, what: str) -> None:
        if time.monotonic() > deadline:
            holders = "; ".join(self.running()) or "nobody it could name"
            raise AdmissionTimeout(f"waited {self.timeout_s:.0f} s for {what} of {self.folder}: held by {holders}")
        time.sleep(POLL_S)

    def _write_who(self, index: int, text: str) -> None:
        self._who_path(index).write_text(text + "\n" if text else "")

    def _unlock(self, fd: int) -> None:
        os.close(fd)

    def _release(self) -> None:
        held, self._held = self._held, []
        for fd in held:
            self._unlock(fd)

    def _not_nested(self) -> None:
        if self._held:
            raise RuntimeError("a trial asked for the machine while this process already holds a slot")
