"""The regression and fix switches' names, on the harness's side of the process boundary.

The switches themselves are code that runs inside the target's Python
(``faultload/targets/skyrl_patches.py`` and ``skyrl_mutants.py`` for SkyRL,
``tuft_fixes.py`` for TuFT, ``hatchery_fixes.py`` for hatchery-core, shipped beside the launcher and imported there as
top-level modules); the harness only needs their names, to check a user's
``--regress``/``--fix`` early and to name them in log lines, so it imports this
instead of code written for another interpreter. Which family has which is
``model.family.TRAITS``. ``tests/unit/test_targets.py`` checks the lists stay the same.
"""

from __future__ import annotations

from typing import Iterable

REGRESSIONS = (
    "retention",
    "keepalive",
    "rich-access-log",
    "httpx-forwarding",
    "json-decode",
    "proto-per-poll",
    # bug classes a pull request could introduce (targets/skyrl_mutants.py), not undone fixes
    "never-resolve-on-failure",
    "early-408",
    "lost-wakeup",
    "id-reuse-after-restart",
    "500-for-unknown",
    "blocking-call",
    "mixed-results",
    "pending-ttl-short",
    "swapped-ttls",
    "truncated-result",
    "empty-200-on-failure",
    "double-forward",
    "session-per-request",
    # the contract's time edges (targets/skyrl_mutants_time.py)
    "completed-ttl-from-creation",
    "retrieved-ttl-from-completion",
    "retrieved-ttl-short",
    # limits that bite past a thousand in flight (targets/skyrl_mutants_size.py)
    "store-capped",
    "results-capped",
    "forwarding-pool-default",
    "forwarding-semaphore",
    # a cost per request that grows with what the store holds (targets/skyrl_mutants_cost.py)
    "lookup-by-scan",
    "sweep-on-create",
    # what the store keeps (targets/skyrl_mutants_keep.py)
    "keep-delivered",
    "evict-pending-only",
    "naive-completed-at",
    "sweep-counts-bytes",
)
SKYRL_FIXES = ("plain-tracebacks", "keepalive-past-sdk", "retain-until-expiry", "sample-sequence-ids")
TUFT_FIXES = ("newest-sdk-samples", "file-persistence", "history-in-order", "sequence-tiebreak")
HATCHERY_FIXES = ("sampling-session-answer", "proto-sample-results")
TWINKLE_FIXES = ("prompt-logprobs-asked",)
FIXES = SKYRL_FIXES + TUFT_FIXES + HATCHERY_FIXES + TWINKLE_FIXES


def switches_text(regress: Iterable[str], fixes: Iterable[str]) -> str:
    """ ", regress a,b, fix c" for log lines ("" when neither is set)."""
    regress, fixes = list(regress), list(fixes)
    return (f", regress {','.join(regress)}" if regress else "") + (f", fix {','.join(fixes)}" if fixes else "")


def unknown_switch(regress: Iterable[str], fixes: Iterable[str]) -> str | None:
    """What is wrong with the switch names ("unknown fix 'x'; known: ..."), or None."""
    for names, known, what in ((regress, REGRESSIONS, "regression"), (fixes, FIXES, "fix")):
        for name in names:
            if name not in known:
                return f"unknown {what} {name!r}; known: {', '.join(sorted(known))}"
    return None
