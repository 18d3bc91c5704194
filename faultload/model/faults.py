"""Fault specs as plain, validated data.

A :class:`Fault` says *what* goes wrong on which link, when, and for how long; a
:class:`FaultSchedule` is the tuple of them for one trial.  Both are frozen and
round-trip through JSON exactly, because a repro file is a serialized shape plus
its schedule.  Every check happens at construction, before any Toxiproxy or
router call, and a bad value raises ``ValueError`` with one line naming the
field and what is allowed.

Toxic kinds use Toxiproxy's own names and units (ms, KB/s, bytes, µs) so a spec
reads the same as Toxiproxy's documentation. Process faults (``server:pause``,
``router:pause``: SIGSTOP for a window; ``server:restart``: an instant) act on
the processes, not a socket.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, cast

from faultload.model.anchors import ANCHOR_EVENTS, Anchor
from faultload.model.fault_kinds import (
    FATAL_FAULTS,
    KIND,
    KINDS,
    LINKS,
    OUTAGE_KINDS,
    PAUSE_FAULTS,
    PROXY_KINDS,
    PROXY_LINKS,
    ROUTER_KINDS,
    ROUTER_TIMED_KINDS,
    SERVER_KINDS,
    STREAMS,
    TOXIC_KINDS,
    TOXIPROXY_STREAMS,
    FaultKind,
    is_process_fault,
    kinds_for,
)

_FIELDS = ("link", "kind", "attributes", "stream", "toxicity", "start_s", "duration_s", "anchor")
SPEC_SYNTAX = "LINK:TYPE[:k=v,...][@START[+DURATION]] (START: seconds, or EVENT:K[+OFFSET])"

# The kinds' table lives in fault_kinds.py; its names are importable from here too, where a fault's users have
# always found them.
__all__ = [
    "Fault",
    "FaultSchedule",
    "parse_fault",
    "SPEC_SYNTAX",
    "FATAL_FAULTS",
    "KIND",
    "KINDS",
    "LINKS",
    "OUTAGE_KINDS",
    "PAUSE_FAULTS",
    "PROXY_KINDS",
    "PROXY_LINKS",
    "ROUTER_KINDS",
    "ROUTER_TIMED_KINDS",
    "SERVER_KINDS",
    "STREAMS",
    "TOXIC_KINDS",
    "TOXIPROXY_STREAMS",
    "FaultKind",
    "is_process_fault",
    "kinds_for",
]


def _allowed(items: Any) -> str:
    return ", ".join(str(i) for i in items) or "(none)"


def _number(value: Any, name: str) -> float:
    """A finite, non-negative real number (bools are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"fault.{name}: {value!r} is not a finite number")
    if value < 0:
        raise ValueError(f"fault.{name}: {value!r} is negative; must be >= 0")
    return value


def _attr_int(value: Any, name: str) -> int:
    """Toxiproxy attributes are Go int64: accept ints and integral floats only."""
    number = _number(value, name)
    if float(number) != int(number):
        raise ValueError(f"fault.{name}: {value!r} is not a whole number (Toxiproxy takes integers)")
    return int(number)


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` on ``link`` from ``start_s`` for ``duration_s`` (None: to the end).

    ``start_s`` counts from the start of the load, or, with an ``anchor``, from
    the anchor's event (an offset after it). ``attributes`` may be given as a
    mapping; it is stored as a sorted tuple of (name, int) pairs with defaults
    filled in, so equal faults compare equal.
    """

    link: str
    kind: str
    attributes: tuple[tuple[str, int], ...] | Mapping[str, int | float] = ()  # stored as sorted pairs
    stream: str = "downstream"
    toxicity: float = 1.0
    start_s: float = 0.0
    duration_s: float | None = None
    anchor: Anchor | None = None

    def __post_init__(self) -> None:
        for name in ("link", "kind", "stream"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"fault.{name}: {getattr(self, name)!r} is not a string")
        if self.link not in LINKS:
            raise ValueError(f"fault.link: {self.link!r} is unknown; allowed: {_allowed(LINKS)}")
        kinds = kinds_for(self.link)
        if self.kind not in kinds:
            where = {"router": "router kinds", "server": "server kinds"}.get(self.link, "proxy kinds")
            raise ValueError(
                f"fault.kind: {self.kind!r} is not allowed on link {self.link!r}; {where}: {_allowed(kinds)}"
            )
        object.__setattr__(self, "attributes", self._checked_attributes(kinds[self.kind]))
        self._check_stream_and_toxicity()
        start = float(_number(self.start_s, "start_s"))
        object.__setattr__(self, "start_s", start)
        if self.duration_s is not None:
            duration = float(_number(self.duration_s, "duration_s"))
            if duration <= 0:
                raise ValueError(f"fault.duration_s: {self.duration_s!r} must be > 0 (or null: until the end)")
            object.__setattr__(self, "duration_s", duration)
        object.__setattr__(self, "anchor", Anchor.coerce(self.anchor))
        self._check_process_window()

    def _check_process_window(self) -> None:
        label = f"{self.link}:{self.kind}"
        if label in PAUSE_FAULTS and self.duration_s is None:
            raise ValueError(
                f"fault.duration_s: {label} needs a window (e.g. {label}@2+10); "
                "a pause to the end of the trial is a collapse by construction"
            )
        if label == "server:restart" and self.duration_s is not None:
            raise ValueError(
                f"fault.duration_s: server:restart is an instant and takes no duration "
                f"(e.g. server:restart@{self.start_s!r})"
            )

    def _checked_attributes(self, spec: tuple[tuple[str, ...], dict[str, int]]) -> tuple[tuple[str, int], ...]:
        required, optional = spec
        raw = self.attributes
        if isinstance(raw, Mapping):
            items = list(raw.items())
        else:
            try:
                items = [(k, v) for k, v in raw]
            except (TypeError, ValueError):
                raise ValueError(f"fault.attributes: {raw!r} is not a mapping of name -> number") from None
        allowed = tuple(required) + tuple(optional)
        values: dict[str, int] = dict(optional)
        seen: set[str] = set()
        for key, value in items:
            if key not in allowed:
                raise ValueError(
                    f"fault.attributes: {key!r} is not an attribute of {self.kind!r}; allowed: {_allowed(allowed)}"
                )
            if key in seen:
                raise ValueError(f"fault.attributes: {key!r} is given twice")
            seen.add(key)
            values[key] = _attr_int(value, f"attributes.{key}")
        missing = [k for k in required if k not in seen]
        if missing:
            raise ValueError(
                f"fault.attributes: kind {self.kind!r} requires {_allowed(missing)}; allowed: {_allowed(allowed)}"
            )
        if self.kind == "errors" and not 500 <= values["status"] <= 599:
            raise ValueError(f"fault.attributes.status: {values['status']} is not a 5xx status; allowed: 500..599")
        return tuple(sorted(values.items()))

    def _check_stream_and_toxicity(self) -> None:
        if self.stream not in STREAMS:
            raise ValueError(f"fault.stream: {self.stream!r} is unknown; allowed: {_allowed(STREAMS)}")
        toxicity = _number(self.toxicity, "toxicity")
        if toxicity > 1:
            raise ValueError(f"fault.toxicity: {self.toxicity!r} is outside [0, 1]")
        object.__setattr__(self, "toxicity", float(toxicity))
        if not self.is_toxic and (self.stream != "downstream" or self.toxicity != 1.0):
            raise ValueError(
                f"fault.stream/toxicity: only toxic kinds take them, not {self.kind!r}; "
                f"toxic kinds: {_allowed(TOXIC_KINDS)}"
            )

    @property
    def attribute_items(self) -> tuple[tuple[str, int], ...]:
        """The attributes as (name, value) pairs, sorted: the form ``__post_init__`` stored them in, whatever
        the constructor was given."""
        return cast("tuple[tuple[str, int], ...]", self.attributes)

    @property
    def is_toxic(self) -> bool:
        """True when applied as a Toxiproxy toxic (not ``down``, not a router fault)."""
        return self.link in PROXY_LINKS and self.kind in TOXIC_KINDS

    @property
    def streams(self) -> tuple[str, ...]:
        """The Toxiproxy streams this fault puts a toxic on: ``both`` is the pair; () when not a toxic."""
        if not self.is_toxic:
            return ()
        return TOXIPROXY_STREAMS if self.stream == "both" else (self.stream,)

    @property
    def is_process(self) -> bool:
        """True for a fault on a process (``server:pause``, ``server:restart``, ``router:pause``)."""
        return is_process_fault(self.link, self.kind)

    @property
    def end_s(self) -> float:
        """Scheduled end from the same origin as ``start_s`` (the load's start or the anchor's event); ``inf``
        when it lasts to the end."""
        return math.inf if self.duration_s is None else self.start_s + self.duration_s

    def attr(self, name: str) -> int:
        """One attribute value (defaults are already filled in)."""
        return dict(self.attribute_items)[name]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict; :meth:`from_dict` is its exact inverse."""
        return {
            "link": self.link,
            "kind": self.kind,
            "attributes": dict(self.attributes),
            "stream": self.stream,
            "toxicity": self.toxicity,
            "start_s": self.start_s,
            "duration_s": self.duration_s,
            **({"anchor": self.anchor.to_dict()} if self.anchor is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Fault":
        """Build from :meth:`to_dict` output; unknown keys are an error, not ignored."""
        if not isinstance(data, Mapping):
            raise ValueError(f"fault: {data!r} is not an object; fields: {_allowed(_FIELDS)}")
        extra = sorted(set(data) - set(_FIELDS))
        if extra:
            raise ValueError(f"fault.{extra[0]}: unknown field; allowed: {_allowed(_FIELDS)}")
        for name in ("link", "kind"):
            if name not in data:
                raise ValueError(f"fault.{name}: missing; fields: {_allowed(_FIELDS)}")
        return cls(**dict(data))

    def to_spec(self) -> str:
        """The CLI form (``parse_fault(f.to_spec()) == f``)."""
        parts = [f"{k}={v}" for k, v in self.attribute_items]
        if self.is_toxic and self.stream != "downstream":
            parts.append(f"stream={self.stream}")
        if self.is_toxic and self.toxicity != 1.0:
            parts.append(f"toxicity={self.toxicity!r}")
        text = f"{self.link}:{self.kind}" + (":" + ",".join(parts) if parts else "")
        duration = f"+{self.duration_s!r}" if self.duration_s is not None else ""
        if self.anchor is not None:  # the offset is written whenever a duration follows it
            offset = f"+{self.start_s!r}" if self.start_s or duration else ""
            text += f"@{self.anchor.to_spec()}{offset}{duration}"
        elif self.start_s or duration:
            text += f"@{self.start_s!r}{duration}"
        return text


@dataclass(frozen=True)
class FaultSchedule:
    """The faults of one trial, in the order given (order names the toxics)."""

    faults: tuple[Fault, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        faults = tuple(self.faults)
        for i, fault in enumerate(faults):
            if not isinstance(fault, Fault):
                raise ValueError(f"schedule.faults[{i}]: {fault!r} is not a Fault")
        object.__setattr__(self, "faults", faults)

    def __len__(self) -> int:
        return len(self.faults)

    def to_dict(self) -> dict[str, Any]:
        return {"faults": [f.to_dict() for f in self.faults]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FaultSchedule":
        if not isinstance(data, Mapping) or set(data) != {"faults"} or not isinstance(data["faults"], list):
            raise ValueError('schedule: expected {"faults": [...]}')
        return cls(tuple(Fault.from_dict(f) for f in data["faults"]))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "FaultSchedule":
        return cls.from_dict(json.loads(text))

    @classmethod
    def parse(cls, specs: list[str] | tuple[str, ...]) -> "FaultSchedule":
        """Schedule from CLI specs (``--fault`` repeated)."""
        return cls(tuple(parse_fault(s) for s in specs))


def _parse_value(text: str, field_name: str, spec: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"fault.{field_name}: {text!r} is not a number (in {spec!r})") from None


def _parse_window(window: str, spec: str) -> tuple[float, float | None, Anchor | None]:
    """``START[+DURATION]`` or ``EVENT:K[+OFFSET[+DURATION]]`` -> (start or offset, duration, anchor)."""
    head, *numbers = window.split("+")
    anchor = Anchor.parse(head, spec) if ":" in head or head.strip() in ANCHOR_EVENTS else None
    if anchor is None:
        numbers = [head, *numbers]
    try:
        if len(numbers) > 2:
            raise ValueError
        values = [float(n) for n in numbers]
    except ValueError:
        form = "EVENT:K[+OFFSET[+DURATION]]" if anchor else "START[+DURATION] (START: seconds or EVENT:K)"
        raise ValueError(f"fault.start_s/duration_s: {window!r} is not {form} seconds (in {spec!r})") from None
    return (values[0] if values else 0.0), (values[1] if len(values) == 2 else None), anchor


def parse_fault(spec: str) -> Fault:
    """Parse ``LINK:TYPE[:k=v,...][@START[+DURATION]]``, e.g. ``edge:reset_peer:timeout=0@5+3``.

    ``stream=upstream`` (or ``downstream``, ``both``) and ``toxicity=0.5`` go in the k=v list.  Without ``@`` the
    fault lasts the whole trial from t=0; ``@START`` alone lasts from START to the end. START may be a protocol
    event instead, ``EVENT:K[+OFFSET]`` (the K-th EVENT of the load, OFFSET seconds after it):
    ``edge:timeout:timeout=0@result:1+0.2+20`` holds responses 0.2 s after the first result for 20 s.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"fault spec: {spec!r} is empty; expected {SPEC_SYNTAX}")
    body, at, window = spec.strip().partition("@")
    start, duration, anchor = _parse_window(window, spec) if at else (0.0, None, None)
    pieces = body.split(":", 2)
    if len(pieces) < 2 or not pieces[0] or not pieces[1]:
        raise ValueError(f"fault spec: {spec!r} does not match {SPEC_SYNTAX}")
    link, kind = pieces[0].strip(), pieces[1].strip()
    attributes: dict[str, int | float] = {}
    stream, toxicity = "downstream", 1.0
    given: set[str] = set()
    if len(pieces) == 3 and pieces[2].strip():
        for item in pieces[2].split(","):
            key, eq, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not eq or not key:
                raise ValueError(f"fault.attributes: {item!r} is not k=v (in {spec!r})")
            if key in ("stream", "toxicity") and key in given:
                raise ValueError(f"fault.{key}: given twice (in {spec!r})")
            given.add(key)
            if key == "stream":
                stream = value
            elif key == "toxicity":
                toxicity = _parse_value(value, "toxicity", spec)
            elif key in attributes:
                raise ValueError(f"fault.attributes: {key!r} is given twice (in {spec!r})")
            else:
                attributes[key] = _parse_value(value, f"attributes.{key}", spec)
    return Fault(
        link=link,
        kind=kind,
        attributes=attributes,
        stream=stream,
        toxicity=toxicity,
        start_s=start,
        duration_s=duration,
        anchor=anchor,
    )
