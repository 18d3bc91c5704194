"""Classify a server's log: which kinds of errors it wrote, how often, and when.

SkyRL logs through Rich (``COLUMNS=250`` under faultload) with the format
``%(asctime)s - %(levelname)s - %(name)s: %(message)s``::

    2026-11-30 07:50:14,170 - INFO - uvicorn.error: Started server process [6256]
    2026-11-30 07:50:20,004 - ERROR - skyrl: Backend-forwarded sample failed (request_id=12)
    ╭──────── Traceback (most recent call last) ────────╮
    │ /…/skyrl_train_inference_forwarding.py:118 in call_and_store_result   │
    ╰───────────────────────────────────────────────────╯
    OSError: [Errno 24] Too many open files

A line starting with a timestamp opens a *record*; every following line up to
the next timestamp belongs to it (Rich wraps long messages at the console
width, tracebacks follow ``ERROR`` lines, stray output such as asyncio's
last-resort handler lands in between), except a bare line that begins with
one of asyncio's own error messages (``Unclosed client session``, ``Task
exception was never retrieved``, ...): that is an ERROR of the asyncio
logger printed by Python's last-resort handler, a record of its own, at the
time of the record before it. Plain Python tracebacks
(``Traceback (most recent call last):`` and indented frames) and uvicorn's
default ``ERROR:    …`` format are understood too.

A record is an *error* when its level is ERROR/CRITICAL, when it carries a
traceback, when it says "Too many open files", when it is a WARNING matching
one of the known error patterns below, or when it is an access-log line with
a 5xx status. Each error is counted under one class: the first known pattern
that matches the record's message and exception lines (source lines inside a
traceback are not searched — code mentions ``TimeoutError`` all the time), or
else ``"<ExceptionType>: <normalized message>"`` from its last exception line,
or ``"error: <logger>: <normalized message>"``. A WARNING one of faultload's own
observers wrote inside the server (``NOTE_CLASSES``) is a *note*, not an error.

Timestamps are local wall-clock time as Python logging prints them; they are
turned into epoch seconds with this machine's time zone (check a log on the
machine, or at least in the time zone, that wrote it).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Iterable

import numpy as np

from faultload.record.log_summary import NO_REQUEST_ID, NOTE_CLASSES, LogClass, ServerLogSummary

__all__ = [
    "NO_REQUEST_ID",
    "NOTE_CLASSES",
    "LogClass",
    "ServerLogSummary",
    "classify_lines",
    "classify_log",
    "classify_log_file",
    "normalize_message",
    "KNOWN_CLASSES",
]

# Known error classes, in priority order: the first whose pattern matches wins.
KNOWN_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("too_many_open_files", r"too many open files|\bEMFILE\b|\[Errno 24\]"),
        ("pool_timeout", r"QueuePool limit|\bPoolTimeout\b|pool timed out|pool .{0,40}timed out|pool .{0,40}exhausted"),
        (
            "forwarding_timeout",
            r"SocketTimeoutError|ServerTimeoutError|ReadTimeout|read timeout|"
            r"Timeout on reading data|waiting for a response",
        ),
        (
            "payload_error",
            r"ClientPayloadError|Response payload is not completed|ContentLengthError|"
            r"TransferEncodingError",
        ),
        (
            "connection_reset",
            r"Connection reset|ConnectionResetError|\[Errno 104\]|ServerDisconnectedError|"
            r"Server disconnected|ClientConnectionResetError|BrokenPipeError|\[Errno 32\]|"
            r"Connection lost",
        ),
        (
            "connect_error",
            r"ClientConnectorError|Cannot connect to host|Connection refused|"
            r"ConnectionRefusedError|\[Errno 111\]",
        ),
        ("db_locked", r"database is locked|database table is locked|OperationalError.{0,60}locked"),
        ("future_evicted", r"evicted before its result arrived"),
        ("timeout", r"\bTimeoutError\b|\btimed out\b|\bCancelledError\b.{0,40}timeout"),
    )
)
_EMFILE = KNOWN_CLASSES[0][1]
_NOTE_LOGGER_PREFIX = "faultload."
HTTP_5XX = "http_5xx"
GENERIC_OVERFLOW = "other"
MAX_CLASSES = 64
MILLISECOND = 0.001  # the resolution of a timestamp with milliseconds
EXAMPLE_CHARS = 400

_HEADER_RE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](\d{3}) - ([A-Z]+) - ([^\s:]+): ?(.*)$")
# Ray's formats, and twinkle-kit's, as a server that is a Ray cluster writes them into its launcher's log (its
# workers' lines unprefixed), each as (seconds, millis, level, logger, message):
_OTHER_HEADERS = (
    # Ray core: "2026-12-06 08:43:12,167<TAB>INFO worker.py:1691 -- message"
    (re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](\d{3})\s+([A-Z]+) (\S+) -- ?(.*)$"), (1, 2, 3, 4, 5)),
    # Ray Serve: "INFO 2026-12-06 08:43:14,825 proxy 127.0.0.2 -- message" (component, then its pid or address)
    (re.compile(r"^([A-Z]+) (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](\d{3}) (\S+) \S+ -- ?(.*)$"), (2, 3, 1, 4, 5)),
    # twinkle-kit: "[2026-12-06 08:43:12][INFO:twinkle] message" (whole seconds)
    (re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]\[()([A-Z]+):([^\]]+)\] ?(.*)$"), (1, 2, 3, 4, 5)),
)
_PLAIN_LEVEL_RE = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+(.*)$")
# The first line of what asyncio's default exception handler logs at ERROR (its own messages, and aiohttp's
# for what the garbage collector found unclosed): with no handler on the asyncio logger (SkyRL configures
# none), Python's last-resort handler prints it bare, without time or level, after whatever line came before.
_ASYNCIO_ERROR_RE = re.compile(
    r"^(Unclosed (client session|connector|connection|response)|Task exception was never retrieved|"
    r"Future exception was never retrieved|Task was destroyed but it is pending!|Exception in callback |"
    r"Fatal (read |write )?error on (socket |SSL |pipe )?transport|Exception in default exception handler)"
)
_EXC_LINE_RE = re.compile(
    r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Timeout|Group|Failure))(?::\s*(.*))?$"
)
_REQUEST_ID_RE = re.compile(r"request_id=(-?\d+)")
_ACCESS_5XX_RE = re.compile(r'"\s+(5\d\d)\b[^"]*$')
_BOX_START = ("╭", "│", "╰", "┃", "┏", "┗", "|", "+-")
_ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})
_WARNING_LEVELS = frozenset({"WARNING", "WARN"})


def _maybe_emfile(text: str) -> bool:
    """Cheap substring test before the regex (most lines are access-log lines)."""
    return "files" in text or "FILES" in text or "EMFILE" in text or "Errno 24" in text


def normalize_message(text: str, limit: int = 100) -> str:
    """Collapse what varies between occurrences (numbers, addresses, ids) for grouping."""
    text = re.sub(r"\b0x[0-9a-fA-F]+\b", "<hex>", text)
    text = re.sub(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uuid>", text)
    text = re.sub(r"\d+", "N", text)
    text = " ".join(text.split())
    return text[:limit]


class _Record:
    __slots__ = ("time_text", "ts", "level", "logger", "message", "text", "exc_lines", "traceback", "resolution")

    def __init__(
        self,
        time_text: str | None,
        ts: float | None,
        level: str | None,
        logger: str,
        message: str,
        resolution: float = MILLISECOND,
    ):
        self.time_text = time_text
        self.ts = ts
        self.resolution = resolution  # the written time is the start of an interval this long
        self.level = level
        self.logger = logger
        self.message = message
        self.text: list[str] = [message]
        self.exc_lines: list[str] = []
        self.traceback = False


class _Acc:
    __slots__ = ("count", "example", "times", "request_ids", "first_time", "last_time", "untimed", "resolution")

    def __init__(self, example: str) -> None:
        self.resolution = MILLISECOND
        self.count = 0
        self.example = example
        self.times: list[float] = []
        self.request_ids: list[int] = []
        self.first_time: str | None = None
        self.last_time: str | None = None
        self.untimed = 0


class _Classifier:
    """Feed lines one by one (streaming, so a huge log need not be held twice)."""

    def __init__(self) -> None:
        self.lines = 0
        self.records = 0
        self.warnings = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.current: _Record | None = None
        self.acc: dict[str, _Acc] = {}
        self.notes: dict[str, _Acc] = {}
        self._epoch_cache: dict[str, float] = {}

    def _epoch(self, seconds_text: str, millis: str) -> float | None:
        base = self._epoch_cache.get(seconds_text)
        if base is None:
            try:
                base = datetime.strptime(seconds_text, "%Y-%m-%d %H:%M:%S").timestamp()
            except (ValueError, OverflowError, OSError):
                return None
            if len(self._epoch_cache) > 4096:
                self._epoch_cache.clear()
            self._epoch_cache[seconds_text] = base
        return base + int(millis) / 1000.0

    def feed(self, raw: str) -> None:
        self.lines += 1
        line = raw.rstrip()
        if line[:2].isdigit():
            match = _HEADER_RE.match(line) or _OTHER_HEADERS[0][0].match(line)
            if match:
                self._open(*match.groups())
                return
        if not line:
            return
        if line[0] in "[ACDEFIW":  # the other formats' first characters: a bracket or a level
            for pattern, groups in _OTHER_HEADERS:
                other = pattern.match(line)
                if other:
                    self._open(*(other.group(g) for g in groups))
                    return
        plain = _PLAIN_LEVEL_RE.match(line)
        if plain:
            self._finish()
            self.current = _Record(None, None, plain.group(1), "", plain.group(2))
            return
        if line[0] in "UTFE" and _ASYNCIO_ERROR_RE.match(line):  # asyncio's, printed bare: its own ERROR record
            self._stray_asyncio_error(line)
            return
        record = self.current
        if record is None:
            record = self.current = _Record(None, None, None, "", "")
        if line.startswith(_BOX_START):
            if "Traceback" in line:
                record.traceback = True
            return  # source lines and frames inside a Rich traceback box
        if line.startswith("Traceback (most recent call last)"):
            record.traceback = True
            return
        if line[0] in " \t":
            return  # frames / source of a plain traceback
        record.text.append(line)
        if _EXC_LINE_RE.match(line):
            record.exc_lines.append(line)

    def _open(self, seconds: str, millis: str, level: str, logger: str, message: str) -> None:
        """A timestamped line: the record it opens."""
        self._finish()
        resolution = MILLISECOND if millis else 1.0  # twinkle's format prints whole seconds
        millis = millis or "000"
        ts = self._epoch(seconds, millis)
        self.records += 1
        if ts is not None:
            self.first_ts = ts if self.first_ts is None else self.first_ts
            self.last_ts = ts
        self.current = _Record(f"{seconds},{millis}", ts, level, logger, message, resolution)
        if message.startswith("Traceback (most recent call last)"):
            self.current.traceback = True  # a traceback logged as the message (twinkle's handlers)

    def _stray_asyncio_error(self, line: str) -> None:
        """An ERROR of the asyncio logger printed without time or level: written after the record before it, so
        it takes that record's time (a lower bound; untimed when there was none)."""
        before = self.current
        self._finish()
        time_text, ts = (before.time_text, before.ts) if before is not None else (None, None)
        resolution = before.resolution if before is not None else MILLISECOND
        self.current = _Record(time_text, ts, "ERROR", "asyncio", line, resolution)

    def _finish(self) -> None:
        record, self.current = self.current, None
        if record is None:
            return
        note = _note_class(record)
        if note is not None:
            _add(self.notes.setdefault(note, _Acc(_example(record))), record)
            return
        name = self._classify(record)
        if name is None:
            if record.level in _WARNING_LEVELS:
                self.warnings += 1
            return
        acc = self.acc.get(name)
        if acc is None:
            if len(self.acc) >= MAX_CLASSES and name not in {n for n, _ in KNOWN_CLASSES}:
                name = GENERIC_OVERFLOW
                acc = self.acc.get(name)
            if acc is None:
                acc = self.acc[name] = _Acc(_example(record))
        _add(acc, record)

    def _classify(self, record: _Record) -> str | None:
        level = record.level
        is_error = level in _ERROR_LEVELS or record.traceback or bool(record.exc_lines and level is None)
        text = " ".join(record.text) if len(record.text) > 1 else record.message
        if not is_error and level not in _WARNING_LEVELS:
            # The common case (INFO/DEBUG, access log): only two questions.
            if _maybe_emfile(text) and _EMFILE.search(text):
                return "too_many_open_files"
            if record.logger == "uvicorn.access" and '" 5' in record.message and _ACCESS_5XX_RE.search(record.message):
                return HTTP_5XX
            return None
        text = " ".join(text.split())
        known = next((name for name, pattern in KNOWN_CLASSES if pattern.search(text)), None)
        if not is_error:  # a WARNING: an error only when it names a known error
            return known
        if known is not None:
            return known
        if record.exc_lines:
            match = _EXC_LINE_RE.match(record.exc_lines[-1])
            assert match is not None
            exc_type = match.group(1).rsplit(".", 1)[-1]
            message = match.group(2) or ""
            return f"{exc_type}: {normalize_message(message)}" if message else exc_type
        if record.traceback:
            return "traceback"
        where = f"{record.logger}: " if record.logger else ""
        return f"error: {where}{normalize_message(record.message)}"

    def summary(self) -> ServerLogSummary:
        self._finish()
        classes = {name: _log_class(name, acc) for name, acc in self.acc.items()}
        notes = {name: _log_class(name, acc) for name, acc in self.notes.items()}
        return ServerLogSummary(self.lines, self.records, self.warnings, classes, self.first_ts, self.last_ts, notes)


def _add(acc: _Acc, record: _Record) -> None:
    """One more occurrence of ``acc``'s class: ``record``."""
    acc.count += 1
    if record.ts is None:
        acc.untimed += 1
    else:
        acc.times.append(record.ts)
        acc.resolution = max(acc.resolution, record.resolution)
        acc.request_ids.append(_request_id(record))
        acc.first_time = acc.first_time or record.time_text
        acc.last_time = record.time_text


def _log_class(name: str, acc: _Acc) -> LogClass:
    times = np.asarray(acc.times, dtype=np.float64)
    return LogClass(
        name=name,
        count=acc.count,
        example=acc.example,
        first_ts=float(times[0]) if times.size else None,
        last_ts=float(times[-1]) if times.size else None,
        first_time=acc.first_time,
        last_time=acc.last_time,
        times=times,
        untimed=acc.untimed,
        request_ids=np.asarray(acc.request_ids, dtype=np.int64),
        resolution_s=acc.resolution,
    )


def _note_class(record: _Record) -> str | None:
    """The NOTE_CLASSES name of a WARNING one of faultload's observers wrote, else None."""
    if record.level not in _WARNING_LEVELS or not record.logger.startswith(_NOTE_LOGGER_PREFIX):
        return None
    return next((name for name, pattern in NOTE_CLASSES if pattern.search(record.message)), None)


def _request_id(record: _Record) -> int:
    match = _REQUEST_ID_RE.search(record.message)
    if match is None:
        return NO_REQUEST_ID
    value = int(match.group(1))
    return value if NO_REQUEST_ID < value < 2**63 else NO_REQUEST_ID


def _example(record: _Record) -> str:
    head = " ".join(f"{record.time_text or ''} {record.level or ''} {record.logger}".split())
    message = " ".join(next((t for t in record.text if t.strip()), "").split())
    parts = [f"{head}: {message}" if head else message]
    if record.exc_lines and record.exc_lines[-1] not in message:
        parts.append(record.exc_lines[-1])
    line = " | ".join(p for p in parts if p)
    return line if len(line) <= EXAMPLE_CHARS else line[: EXAMPLE_CHARS - 1] + "…"


def classify_lines(lines: Iterable[str]) -> ServerLogSummary:
    """Classify an iterable of log lines (newlines optional)."""
    classifier = _Classifier()
    for line in lines:
        classifier.feed(line)
    return classifier.summary()


def classify_log(text: str) -> ServerLogSummary:
    """Classify a whole log given as text."""
    return classify_lines(text.splitlines())


def classify_log_file(path: str | Path) -> ServerLogSummary:
    """Classify a log file line by line (undecodable bytes replaced)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        return classify_lines(handle)
