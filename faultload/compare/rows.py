"""A detection-matrix row judged by comparison: ``faultload compare`` of the row's build against a baseline.

A performance regression loses nothing and breaks no budget, so the suite's
properties cannot catch it; its row runs ``faultload compare`` instead (as a
subprocess, like every row) and is caught when the comparison calls a metric
worse. The row's trial and repeats are the same on every profile: the
thresholds were calibrated at this size, and a smaller one would widen the
intervals until nothing could be caught.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# The reference harness's burst: 4,096 requests held by a barrier router, released at once (no outstanding
# cap: with the default 2,000 the barrier is 2,000 wide and the last 96 wait out its 60 s timeout).
COMPARE_TRIAL = ("--requests", "4096", "--router-mode", "barrier", "--max-outstanding", "0")
COMPARE_REPEATS = 5
# Long results: 1,024 requests of 32,768 tokens each, the same burst. The release's encode-once and orjson
# fixes save a cost per token (its serialize_sample_output docstring: a pydantic model or JSON text "costs
# about as much as this whole function for a 32k-token result"); at 64 tokens it is lost in the per-request
# cost. At 16,384 tokens json-decode's ×1.2-1.4 was within this machine's drift (caught in 1 of 2 runs; an A/A
# there reached ×1.13); at 32,768 it was ×2.1 (interval 1.18-2.65) and the A/A ×0.99.
LONG_RESULT_TRIAL = (
    "--requests",
    "1024",
    "--result-tokens",
    "32768",
    "--router-mode",
    "barrier",
    "--max-outstanding",
    "0",
)
# A large store: 16,384 requests, 1,024 at a time, every result answered at once and kept its retrieved TTL
# (300 s, past the trial), so the store holds up to 16,384 delivered results as later requests are served. A cost
# per request that grows with what the store holds shows here: at the 4,096 burst (at most 4,096 held, 2,048 on
# average) a poll that walked every entry cost x1.08 (interval 1.03-1.19), under the 1.15 threshold.
STORE_TRIAL = ("--requests", "16384", "--router-mode", "immediate", "--max-outstanding", "1024")


def compare_command(
    baseline: str,
    candidate: str,
    out: Path,
    python: str = sys.executable,
    trial: tuple[str, ...] = COMPARE_TRIAL,
    repeats: int = COMPARE_REPEATS,
) -> list[str]:
    """The command line of a comparison row (its result JSON goes to ``out``)."""
    return [
        python,
        "-m",
        "faultload",
        "compare",
        "--baseline",
        baseline,
        "--candidate",
        candidate,
        "--repeats",
        str(repeats),
        *trial,
        "--json-out",
        str(out),
        "--quiet",
    ]


def compare_outcome(result: dict[str, Any] | None, returncode: int | None) -> tuple[str, list[str], str | None]:
    """(result, caught_by, error) of a comparison row from its ``faultload.compare/1`` JSON and exit code.

    caught: some metric is worse (caught_by: those metrics); clean: nothing
    worse or unknown, every trial ran; error: no result, a metric unknown, a
    trial that failed to run, or an exit code that is not a verdict.
    """
    if result is None or returncode not in (0, 1):
        return "error", [], f"faultload compare exited {returncode}" + ("" if result else " without a result")
    failed = [t for t in result.get("trials", []) if t.get("error")]
    if failed:
        return "error", [], f"{len(failed)} trial(s) failed to run, e.g. {failed[0]['error']}"
    if result["worse"]:
        return "caught", list(result["worse"]), None
    if result["unknown"]:
        return "error", [], f"not judged: unknown {', '.join(result['unknown'])}"
    return "clean", [], None
