"""What one row of the detection matrix is: a build, and the result the suite must give it on each profile.

The type alone, apart from the rows themselves (``faultload.matrix.rows``, ``faultload.matrix.mutant_rows``),
so that every module of rows builds on it without importing another.
"""

from __future__ import annotations

from dataclasses import dataclass

from faultload.compare.rows import COMPARE_TRIAL
from faultload.model.build import Build

# A row's expectation on a profile that cannot judge it (its bug needs traffic the profile never draws, or its
# property runs fewer trials there than the profile's minimum): the row is not run there, and says so.
NOT_RUN = "skipped"


@dataclass(frozen=True)
class Expectation:
    """What a row must come out as on a profile, and which invariants must be the ones that catch it."""

    expected: str  # "clean" | "caught" | NOT_RUN (``why`` then says why, and where the row is run)
    caught_by: tuple[str, ...] = ()  # when caught: at least one of these must be among the violated
    why: str = ""  # why this expectation (on a profile override: what differs there)


@dataclass(frozen=True)
class MatrixRow:
    """One (target, regression and fix switches) with the result the suite must give."""

    name: str
    target: str
    regress: tuple[str, ...]
    expected: str  # "clean" | "caught" (every profile, unless ``on`` says otherwise; there also NOT_RUN)
    why: str  # what the row proves (the upstream fix a regression switch undoes, the bug a fix mends)
    fixes: tuple[str, ...] = ()
    caught_by: tuple[str, ...] = ()  # the invariants that name the bug; () for an expected-clean row
    on: tuple[tuple[str, Expectation], ...] = ()  # (profile, expectation) overrides
    # a comparison row: `faultload compare` against this build (caught_by: compare metrics), not a suite session
    baseline: str | None = None
    # a comparison row's trial (the same on every profile): a cost that grows with the result's size is
    # compared at a size where it shows; the default is the reference harness's 4,096 barrier burst
    compare_trial: tuple[str, ...] = COMPARE_TRIAL
    # run only the suite's properties this pytest -k expression selects (None: every property)
    only: str | None = None
    # the SDK release the session's real-SDK trials run (--faultload-sdk); None: the one beside faultload
    sdk: str | None = None

    @property
    def build(self) -> str:
        """The row's own build spec (target + switches), as ``faultload compare`` takes it."""
        return Build(self.target, tuple(sorted(self.regress)), tuple(sorted(self.fixes))).text

    def expectation(self, profile: str) -> Expectation:
        for name, expectation in self.on:
            if name == profile:
                return expectation
        return Expectation(self.expected, self.caught_by, self.why)

    def runs_on(self, profile: str) -> bool:
        """False when the row's expectation on ``profile`` is that it is not run there."""
        return self.expectation(profile).expected != NOT_RUN
