"""How long the suite takes to shrink a failing trial of thousands of requests to its minimal repro.

Builds the trial from `faultload run` options (default: 4,096 requests under
``--regress retention``, a quarter of them dropping their first poll and
polling again 75 SDK s later, at the suite's time scale 0.05: results are lost), hands it to the suite's own
engine (:class:`faultload.suite.runner.SuiteRunner`, the nightly profile's
bounds, the real shared stack) as the ``no_lost_results`` property's first
failure, and prints each reduction step, the minimal repro's size and the wall
from the first failure to the end of the reduction. Hypothesis's own shrinker
runs after this in a real session; here only the suite's greedy reduction is
timed, which is what bounds a large trial's shrink.

Usage: .faultload/venv/bin/python bench/shrink_time.py [--profile nightly|ci] [RUN_ARGS...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import hypothesis
import hypothesis.strategies

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from faultload.checker.budgets import load_budgets  # noqa: E402
from faultload.cli.from_args import config_from_args  # noqa: E402
from faultload.cli.parser import build_parser  # noqa: E402
from faultload.host.workspace import Workspace  # noqa: E402
from faultload.suite.profiles import PROFILES  # noqa: E402
from faultload.suite.properties import LOST  # noqa: E402
from faultload.suite.runner import SuiteRunner  # noqa: E402

DEFAULT_ARGS = ["--requests", "4096", "--regress", "retention", "--abandon-polls", "0.25@75", "--time-scale", "0.05"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="nightly", choices=("nightly", "ci"))
    known, rest = parser.parse_known_args()
    config = config_from_args(build_parser().parse_args(["run", *(rest or DEFAULT_ARGS)]))
    root = Path(__file__).resolve().parent.parent
    runner = SuiteRunner(
        PROFILES[known.profile],
        config.target,
        config.regress,
        Workspace.default(os.environ.get("FAULTLOAD_HOME")),
        load_budgets(root / "pyproject.toml"),
    )
    state = runner.begin("bench/shrink_time.py")
    started = time.monotonic()

    # check() steers Hypothesis (hypothesis.target), so it runs inside a one-example test, as in the suite
    @hypothesis.settings(
        max_examples=1, database=None, deadline=None, suppress_health_check=list(hypothesis.HealthCheck)
    )
    @hypothesis.given(hypothesis.strategies.just(config))
    def one_example(drawn) -> None:
        runner.check(LOST, drawn)

    try:
        one_example()
        print("the trial did not fail: nothing to shrink")
        return 1
    except AssertionError:
        pass
    finally:
        runner.end()
        runner.close()
    ended = time.monotonic()
    first = state.first_failure_at or started
    for step in state.reduce_log:
        print(
            f"  {step['step']:<32} {step['requests']:>6} requests  {'fails' if step['still_fails'] else 'passes':<6}"
            f" {step['seconds']:>6.1f} s"
        )
    best = state.best[0] if state.best else config
    print(
        f"first failure: {config.shape.requests} requests after {first - started:.1f} s; reduced to "
        f"{best.shape.requests} requests ({', '.join(f.to_spec() for f in best.faults.faults) or 'no fault'}) in {ended - first:.1f} s "
        f"({len(state.reduce_log)} steps, {runner.trials} trials, {runner.stack_starts} stack starts); "
        f"{ended - started:.1f} s in all"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
