"""A rule of the futures contract (:class:`Rule`) and what applying it to a trial gives (:class:`Allowance`).

A rule says what a correct server may (or must) do at one point of the
protocol and why. Applied to a trial's history it marks the requests whose
outcome it allows (or, for a rule that requires, the ones that broke it) and
writes one note for the verdict's detail line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from faultload.checker.inputs import RuleCase


@dataclass(frozen=True)
class Rule:
    """One rule: its name (tests and notes name it), what it says, and why a correct server behaves so."""

    name: str
    says: str
    why: str


@dataclass(frozen=True)
class Allowance:
    """The rows a rule allowed (or found broken) in one trial, and the note that says so ("" when none)."""

    rule: Rule
    rows: np.ndarray  # bool, one per row of what the rule was applied to
    note: str = ""
    # per row, how many of its events the rule allowed, for a rule that allows events rather than rows (a
    # request's polls that were the long-poll cycle); None for the others
    counts: np.ndarray | None = None

    @property
    def count(self) -> int:
        return int(np.count_nonzero(self.rows))

    @classmethod
    def none(cls, rule: Rule, n: int) -> "Allowance":
        return cls(rule, np.zeros(n, dtype=bool))


def cases_of(*allowances: Allowance) -> tuple[RuleCase, ...]:
    """The rules that covered any request of a trial, with how many: a verdict's ``cases``."""
    return tuple(RuleCase(a.rule.name, a.count) for a in allowances if a.count)
