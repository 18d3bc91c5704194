"""The pull-request gate: every example on the head and on its base, each violation new, known or fixed.

A pull request is judged by what it changed. With a base (``--faultload-base``: the merge base's checkout, a
second target of the same family), each example the suite draws runs on the head and again on the base, on
the same seeds and schedule: the config retargeted, the session's fixes on both sides and its regressions on
the head only (a regression switch stands for the change under review). A violation is **new** when the head
shows it and the base, on the same example, does not; **known** when both do; **fixed** when the base shows it
and the head does not. Only new violations fail a property; known and fixed ones are counted per invariant
and listed in the summary, with the examples that showed them. A head violation the base did not show is tried on the base
:data:`BASE_AGAIN` times more first. Without a base every violation fails, as on nightly and in ``faultload run``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from faultload.model.target import parse_target

NEW, KNOWN, FIXED = "new", "known", "fixed"
# A head violation its base did not show on the same example is tried on the base this many times more before it
# is new: a violation that shows on some runs of an example (a stall that needs the load to meet it at the right
# moment) shows on the base's runs too when the pull request did not bring it.
BASE_AGAIN = 2


def on_base(config: Any, base: str) -> Any:
    """``config`` as the base runs it: the base's target, the session's fixes, none of its regressions."""
    return dataclasses.replace(config, target=base, regress=())


def check_base(target: str, base: str) -> str:
    """``base`` as a target of ``target``'s family that faultload launches; ValueError naming what is wrong."""
    head, other = parse_target(target), parse_target(base)
    if other.kind == "url":
        raise ValueError(
            f"--faultload-base {base!r}: a base is a build faultload launches (FAMILY@PATH, FAMILY==X.Y.Z)"
        )
    if head.kind == "url":
        raise ValueError("--faultload-base: the target is a url=, which has no base faultload can launch beside it")
    if other.family != head.family:
        raise ValueError(f"--faultload-base {base!r}: a {other.family} build, the target is {head.family}")
    if other.text == head.text:
        raise ValueError(f"--faultload-base {base!r}: the target itself")
    return other.text


@dataclass
class Seen:
    """One invariant's examples in one class: how many, and the smallest (its requests, its config's key)."""

    examples: int = 0
    requests: int | None = None
    key: str | None = None

    def add(self, requests: int, key: str) -> None:
        self.examples += 1
        if self.requests is None or requests < self.requests:
            self.requests, self.key = requests, key


@dataclass
class GateTally:
    """A property's examples judged on both builds, and per class (new, known, fixed) each invariant's examples."""

    both: int = 0  # examples run on the head and on the base
    head_only: int = 0  # examples run on the head whose base run a time bound cut (a head violation never is)
    seen: dict[str, dict[str, Seen]] = field(default_factory=lambda: {NEW: {}, KNOWN: {}, FIXED: {}})
    counted: set[str] = field(default_factory=set)

    def to_dict(self) -> dict[str, Any]:
        return {
            "both": self.both,
            "head_only": self.head_only,
            **{
                kind: {name: dataclasses.asdict(s) for name, s in by_name.items()}
                for kind, by_name in self.seen.items()
            },
        }


def violated_names(outcome: Any) -> set[str]:
    """The invariants an outcome's trial violated."""
    return {v.name for v in outcome.verdicts if v.ok is False}


def classify(head_violations: list, base: set[str] | None) -> tuple[list, list, list[str]]:
    """(new, known, fixed): the head's violations the base did not show on the same example, those it showed too,
    and the invariants the base violated (``base``) that the head did not. No base run: every violation is new."""
    if base is None:
        return list(head_violations), [], []
    head = {v.name for v in head_violations}
    new = [v for v in head_violations if v.name not in base]
    known = [v for v in head_violations if v.name in base]
    return new, known, sorted(base - head)


def count(tally: GateTally, key: str, requests: int, new: list, known: list, fixed: list[str], both: bool) -> None:
    """Count one example once (Hypothesis replays examples): its classes per invariant."""
    if key in tally.counted:
        return
    tally.counted.add(key)
    if both:
        tally.both += 1
    else:
        tally.head_only += 1
    for kind, names in ((NEW, [v.name for v in new]), (KNOWN, [v.name for v in known]), (FIXED, fixed)):
        for name in names:
            tally.seen[kind].setdefault(name, Seen()).add(requests, key)


def gate_lines(tally: GateTally) -> list[str]:
    """The terminal's lines for one property's gate: examples on both builds, then known and fixed invariants."""
    if not tally.both and not tally.head_only:
        return []
    cut = f", {tally.head_only} on the head only (time bound)" if tally.head_only else ""
    lines = [f"    {tally.both} examples on the head and its base{cut}"]
    for kind, what in ((KNOWN, "known (the base too, not failed)"), (FIXED, "fixed (the base only)")):
        for invariant, s in sorted(tally.seen[kind].items()):
            lines.append(f"    {what}: {invariant} in {s.examples} examples, the smallest {s.requests} requests")
    return lines
