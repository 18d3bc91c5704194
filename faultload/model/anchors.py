"""Protocol events a fault may start at, instead of a clock time.

A fault started at a clock time meets a race with the protocol only by chance:
a result written into a blackholed connection needs the blackhole to begin
just after results start flowing, whenever that is. An :class:`Anchor` names
the event and which occurrence of it (counted from the start of the load); the
fault's ``start_s`` is then an offset after it, and the fault runner waits for
it (``faultload.faults.schedule``), bounded by the end of the load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

# event -> what is counted (the fault runner is handed one counter per event by the trial)
ANCHOR_EVENTS: dict[str, str] = {
    "completion": "the router answered a generation (its completion log)",
    "result": "a client received a whole result (the load workers' live counters)",
    "poll_timeout": "a client's retrieve_future poll timed out (the load workers' live counters)",
}
_ANCHOR_FIELDS = ("event", "count")


@dataclass(frozen=True)
class Anchor:
    """The ``count``-th ``event`` of the load (1: the first)."""

    event: str
    count: int = 1

    def __post_init__(self) -> None:
        if self.event not in ANCHOR_EVENTS:
            raise ValueError(f"fault.anchor.event: {self.event!r} is unknown; allowed: {', '.join(ANCHOR_EVENTS)}")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"fault.anchor.count: {self.count!r} is not a whole number >= 1")

    def to_spec(self) -> str:
        """``EVENT:K``, as a fault spec writes it after ``@``."""
        return f"{self.event}:{self.count}"

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.event, "count": self.count}

    @classmethod
    def coerce(cls, value: Any) -> "Anchor | None":
        """An Anchor from itself, None, or its :meth:`to_dict` mapping (unknown keys are an error)."""
        if value is None or isinstance(value, Anchor):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"fault.anchor: {value!r} is not an object with {', '.join(_ANCHOR_FIELDS)}")
        extra = sorted(set(value) - set(_ANCHOR_FIELDS))
        if extra or "event" not in value:
            raise ValueError(f"fault.anchor: expected fields {', '.join(_ANCHOR_FIELDS)}; got {sorted(value)}")
        return cls(**dict(value))

    @classmethod
    def parse(cls, text: str, spec: str) -> "Anchor":
        """``EVENT:K`` (``K`` a whole number >= 1)."""
        event, colon, count = text.partition(":")
        if not colon or not count.strip().isdigit():
            raise ValueError(
                f"fault.anchor: {text!r} is not EVENT:K (K a whole number >= 1; in {spec!r}); "
                f"events: {', '.join(ANCHOR_EVENTS)}"
            )
        return cls(event.strip(), int(count))
