"""What a fault schedule really did: one record per fault, with the times it was in force.

Kept apart from :mod:`.schedule` (which applies faults through Toxiproxy and
the router) so that a checker or a stored trial bundle reads the record
without loading a Toxiproxy client.

The recorded window is deliberately wide: ``applied_at_s`` is when the apply
call *began* and ``removed_at_s`` when the removal call *finished*, so an error
that a fault might have caused always falls inside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from faultload.model.faults import Fault
from faultload.model.watchdog import FaultWindow

# What a process fault did, in words, for the report (the spec says when).
PROCESS_EFFECTS = {
    "server:pause": "server process SIGSTOPped, then SIGCONTed",
    "server:restart": "server stopped and started again on its port (futures it held died with it)",
    "router:pause": "router processes SIGSTOPped (a weight sync: connections accepted, nothing answered), then SIGCONTed",
}


@dataclass(frozen=True)
class AppliedFault:
    """One fault as it really happened; times in seconds from trial start (and epoch)."""

    index: int
    fault: Fault
    applied_at_s: float | None = None
    removed_at_s: float | None = None
    applied_at_epoch: float | None = None
    removed_at_epoch: float | None = None
    error: str | None = None  # applying failed: the fault never took effect
    remove_error: str | None = None  # removal failed (heal's reset is the backstop)
    removed_by: str | None = None  # "schedule" or "heal"
    event_at_s: float | None = None  # an anchored fault: when its event came (trial seconds)
    not_applied: str | None = None  # an anchored fault whose event never came: why it was never applied

    @property
    def applied(self) -> bool:
        return self.applied_at_s is not None and self.error is None

    @property
    def effect(self) -> str | None:
        """What a process fault did, in words; None for a toxic, a proxy down or a router fault."""
        return PROCESS_EFFECTS.get(f"{self.fault.link}:{self.fault.kind}")

    @property
    def healed_at_s(self) -> float | None:
        """When the fault was known gone: its removal's end; None while it is in force, and when its removal
        failed (the injector may hold it still: Toxiproxy's control port can hang removing a toxic under
        traffic, Shopify/toxiproxy#558, and the toxic then stays)."""
        return self.removed_at_s if self.remove_error is None else None

    def active_at(self, t: float) -> bool:
        """Was this fault (possibly) in force at ``t`` seconds after trial start?"""
        if not self.applied:
            return False
        end = math.inf if self.healed_at_s is None else self.healed_at_s
        return self.applied_at_s <= t <= end  # type: ignore[operator]

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "fault": self.fault.to_dict(),
            "applied_at_s": self.applied_at_s,
            "removed_at_s": self.removed_at_s,
            "applied_at_epoch": self.applied_at_epoch,
            "removed_at_epoch": self.removed_at_epoch,
            "error": self.error,
            "remove_error": self.remove_error,
            "removed_by": self.removed_by,
            "event_at_s": self.event_at_s,
            "not_applied": self.not_applied,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "AppliedFault":
        return cls(**{**data, "fault": Fault.from_dict(data["fault"])})


@dataclass(frozen=True)
class FaultLog:
    """All records of one trial, for attribution and for a trial bundle (``faults.json``)."""

    records: tuple[AppliedFault, ...]
    trial_start_epoch: float | None = None

    def active_at(self, t: float) -> list[Fault]:
        """Faults possibly in force ``t`` seconds after trial start."""
        return [r.fault for r in self.records if r.active_at(t)]

    def windows(self) -> tuple[FaultWindow, ...]:
        """Each fault that took effect, from its apply to its removal (``inf``: not removed yet), for the watchdog."""
        return tuple(
            FaultWindow(
                float(r.applied_at_s),
                math.inf if r.healed_at_s is None else float(r.healed_at_s),
                r.fault.link,
                r.fault.kind,
            )
            for r in self.records
            if r.applied and r.applied_at_s is not None
        )

    def unhealed(self) -> tuple[AppliedFault, ...]:
        """The faults whose removal failed: the injector may still hold them, so the trial is not the test it
        was asked to be (a harness error, not a verdict on the server)."""
        return tuple(r for r in self.records if r.applied and r.remove_error is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"trial_start_epoch": self.trial_start_epoch, "records": [r.to_dict() for r in self.records]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FaultLog":
        return cls(tuple(AppliedFault.from_dict(r) for r in data["records"]), data.get("trial_start_epoch"))
