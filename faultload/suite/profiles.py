"""The suite's profiles: how many trials, how big, how long to shrink.

``ci``      small examples, derandomized (the same trials every run), a whole
            run in ≤ 12 minutes on 2 cores at time scale 0.05, its properties
            side by side on the lanes the machine holds (every example of
            every property runs: the time bounds are a backstop); one
            known trial big enough for ``bounded_cpu`` (``cpu_sample``), which
            the small random draws cannot judge; one that holds 2,048
            requests at once (``size_burst``, at full time), past the limits
            that bite only above a thousand; and the contract-edge trials
            (``faultload.strategies.edges``), which draws meet only by chance.
``nightly`` more and larger examples, random, Hypothesis's example database in
            ``.faultload/hypothesis`` (a failure is retried first next night),
            the known-bug trials (``faultload.strategies.known``) first, among
            them 16,384 results owed at once (``size_flood``, at full time);
            late polls drawn around the family's TTLs too; ≤ 60 minutes.
``confirm`` one example: the 131,072-request shape at time scale 1, fitted to
            this machine (``faultload.run.preflight``); the combined property only.

Time is bounded three ways, because Hypothesis has no shrink-time cap of its
own that fits trials of tens of seconds: a property stops drawing new trials
after ``property_s`` (the rest of its examples are counted as *not run*, and
said so), stops shrinking ``shrink_s`` after its first failure (candidates not
yet tried are reported, the smallest failure so far is the repro), and the
whole session stops starting trials after ``session_s``.

A session is only as good as what it judged: ``min_judged_trials`` is the
fewest trials (each judging at least one of its property's invariants) a
matrix row on this profile must have judged to be called clean.
"""

from __future__ import annotations

from dataclasses import dataclass

from faultload.strategies.edges import EDGE_TRIALS
from faultload.strategies.limits import CI, NIGHTLY, Limits

CONFIRM_REQUESTS = 131_072
# The contract-edge trials (faultload.strategies.edges): every profile that draws runs each, for the properties
# that name them, where the target's family has the rule.
EDGE_NAMES = tuple(EDGE_TRIALS)


@dataclass(frozen=True)
class Profile:
    name: str
    time_scale: float
    limits: Limits
    max_examples: int  # per property
    derandomize: bool
    use_database: bool
    property_s: float  # a property's trials (before its first failure) stop here
    shrink_s: float  # a property's shrinking stops this long after its first failure
    session_s: float  # no trial starts after this, whole session
    baseline_wait_s: float  # before each trial: wait this long for the server's fds to settle
    # Share of shrink_s the suite's own greedy reduction (1 request, half the
    # requests, drop each fault, ...) may use at a first failure, before
    # Hypothesis's shrinker gets the rest.
    reduce_share: float = 0.75
    # The known trials (faultload.strategies.known) this profile runs before any random draw,
    # each for the properties that name it (Property.known).
    known_examples: tuple[str, ...] = ()
    confirm: bool = False
    min_judged_trials: int = 1  # a matrix row that judged fewer is "error: not judged", never clean
    # Trials per build in each comparative example (--faultload-baseline): 3 each is the fewest for which
    # "the whole interval past 1" needs every candidate trial worse than every baseline one by chance
    # only 1 time in 20 per metric (2 each: 1 in 6).
    compare_repeats: int = 3
    # Examples of the comparative property (--faultload-baseline): each is 2 x compare_repeats trials, and each
    # of those runs with nothing beside it (faultload.suite.lanes), so they are counted apart from the others'.
    # Each example is a test at its thresholds' false-alarm rate: ci runs the 2 it ran before lanes.
    compare_examples: int = 4


PROFILES: dict[str, Profile] = {
    "ci": Profile(
        name="ci",
        time_scale=0.05,
        limits=CI,
        max_examples=32,
        derandomize=True,
        use_database=False,
        property_s=600.0,
        shrink_s=180.0,
        session_s=600.0,
        baseline_wait_s=20.0,
        known_examples=("cpu_sample", "size_burst", "release_hold") + EDGE_NAMES,
        min_judged_trials=7,
        compare_examples=2,
    ),
    "nightly": Profile(
        name="nightly",
        time_scale=0.05,
        limits=NIGHTLY,
        max_examples=40,
        derandomize=False,
        use_database=True,
        property_s=360.0,
        shrink_s=900.0,
        session_s=3300.0,
        baseline_wait_s=60.0,
        known_examples=("completion_burst", "training_waves", "half_open_delivery", "restart_reuse", "size_flood")
        + EDGE_NAMES,
        min_judged_trials=40,
        compare_repeats=5,
        compare_examples=10,
    ),
    "confirm": Profile(
        name="confirm",
        time_scale=1.0,
        limits=CI.replace(max_faults=0),
        max_examples=1,
        derandomize=True,
        use_database=False,
        property_s=3600.0 * 4,
        shrink_s=0.0,
        session_s=3600.0 * 4,
        baseline_wait_s=120.0,
        confirm=True,
    ),
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown faultload profile {name!r}; known: {', '.join(PROFILES)}") from None
