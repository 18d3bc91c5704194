"""Live progress of a running trial: one updating line on a terminal, plain lines in logs.

On a terminal a rich ``Live`` line is redrawn in place; otherwise (CI logs,
pipes) each update is a plain line, at most every ``log_every_s`` seconds.
"""

from __future__ import annotations

import time
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from faultload.record.samples import SAMPLE_FIELDS


def format_line(total: int, t: float, live: dict[str, int], sample: tuple) -> str:
    s = dict(zip(SAMPLE_FIELDS, sample)) if sample else {}
    done = live.get("completed", 0) + live.get("failed", 0)
    rate = live.get("completed", 0) / t if t > 0 else 0.0
    eta = (total - done) / (done / t) if done and t > 0 else float("nan")
    fds = int(s.get("fds", -1))
    rss = s.get("rss", -1)
    rss_text = f"{rss / 2**20:.0f}MiB" if rss >= 0 else "-"
    eta_text = f"{eta:.0f}s" if eta == eta else "-"
    return (
        f"[{t:7.1f}s] completed {live.get('completed', 0)}/{total} failed {live.get('failed', 0)} "
        f"in-flight {live.get('in_flight', 0)} {rate:.0f}/s | server fds {fds} rss {rss_text} | ETA {eta_text}"
    )


class ProgressLine:
    """Callable the trial reports to: ``(t, live counters, latest monitor sample)``."""

    def __init__(self, total: int, stream: TextIO, log_every_s: float = 10.0) -> None:
        self.total = total
        self.stream = stream
        self.log_every_s = log_every_s
        self._last_log = -float("inf")
        self._console = Console(file=stream)
        self._live: Live | None = None
        if self._console.is_terminal:
            self._live = Live(Text(""), console=self._console, refresh_per_second=4, transient=False)
            self._live.start()

    def __call__(self, t: float, live: dict[str, int], sample: tuple) -> None:
        line = format_line(self.total, t, live, sample)
        if self._live is not None:
            self._live.update(Text(line))
            return
        now = time.monotonic()
        if now - self._last_log >= self.log_every_s:
            self._last_log = now
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
