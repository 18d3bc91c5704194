"""What the fault strategies draw: how often a trial meets the delivery race, and which kinds it covers.

Samples ``--schedules`` fault schedules the way the suite does (Hypothesis's
``@given``, generate phase only, no database, a fixed seed): by default each
a whole trial's (``trial_configs``: the shape is drawn first, so the schedule
is what one trial meets), with ``--draw schedules`` ``fault_schedules(time_scale,
limits)``'s alone (Hypothesis then never repeats a schedule, so an empty one
comes once). It counts:

* schedules with a **delivery race** (``faultload.strategies.faults.is_delivery_race``:
  an edge response blackhole held past the retrieved TTL, under the completed TTL),
  any start, and those anchored after a delivered result;
* schedules with an edge response blackhole at all;
* per ``link:kind`` and per start point (clock or an anchor event) the share of
  schedules holding one, the distinct ``link:kind`` sets and pairs, and schedules
  with two faults of one kind.

``--source DIR`` samples the strategies of another checkout (e.g. a
``git worktree`` of an older commit) in a child Python whose ``faultload`` is
that checkout's; the counting is always this checkout's, so both sides are
judged by one rule.

Usage: .faultload/venv/bin/python bench/fault_draws.py [--limits nightly|ci] [--schedules 4000]
       [--draw trials|schedules] [--time-scale 0.05] [--seed 0] [--source DIR] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# The child of --source imports that checkout's faultload (on its PYTHONPATH), never this one's.
SOURCE = os.environ.get("FAULT_DRAWS_SOURCE")
if SOURCE is None:
    sys.path.insert(0, str(REPO))
SAMPLE_TIMEOUT_S = 1800.0
TARGET = "skyrl==0.4.0"  # the trials' target: whether the SDK client may run, and the contract's clocks


def sample(limits_name: str, count: int, time_scale: float, seed: int, draw: str) -> list[dict[str, Any]]:
    """``count`` schedules as the suite draws them (in this process: the ``faultload`` on ``sys.path``): each a
    whole trial's (``draw="trials"``: what one nightly trial meets) or ``fault_schedules``' alone."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as fixed_seed

    import faultload.strategies as S

    limits = {"nightly": S.NIGHTLY, "ci": S.CI}[limits_name]
    drawn: list[dict[str, Any]] = []

    @fixed_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        S.trial_configs(TARGET, time_scale, limits=limits)
        if draw == "trials"
        else S.fault_schedules(time_scale, limits, **_contract_of(S.fault_schedules))
    )
    def collect(value: Any) -> None:
        drawn.append((value.faults if draw == "trials" else value).to_dict())

    collect()
    return drawn


def _contract_of(strategy: Any) -> dict[str, Any]:
    """TARGET's contract as the strategy's keyword, where the checkout's strategy takes one (older ones drew
    SkyRL's clocks without being told)."""
    import inspect

    from faultload.model.family import CONTRACTS
    from faultload.model.target import parse_target

    if "contract" not in inspect.signature(strategy).parameters:
        return {}
    return {"contract": CONTRACTS[parse_target(TARGET).family]}


def sample_from(source: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Sample in a child Python whose ``faultload`` is ``source``'s (checked, not assumed)."""
    command = [
        sys.executable,
        __file__,
        "--dump",
        "--limits",
        args.limits,
        "--schedules",
        str(args.schedules),
        "--time-scale",
        str(args.time_scale),
        "--seed",
        str(args.seed),
        "--draw",
        args.draw,
    ]
    env = {**os.environ, "PYTHONPATH": str(source), "FAULT_DRAWS_SOURCE": str(source)}
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=SAMPLE_TIMEOUT_S, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def tally(schedules: list[Any], time_scale: float) -> dict[str, Any]:
    """The counts the module docstring lists (this checkout's rule, whatever checkout drew them)."""
    from faultload.strategies.faults import is_delivery_race  # local import: never in the --source child

    contract = _contract_of(is_delivery_race)["contract"]
    n = len(schedules)
    races = [any(is_delivery_race(f, time_scale, contract) for f in s.faults) for s in schedules]
    anchored = [
        any(
            is_delivery_race(f, time_scale, contract) and f.anchor is not None and f.anchor.event == "result"
            for f in s.faults
        )
        for s in schedules
    ]
    blackhole = [
        any((f.link, f.kind) == ("edge", "timeout") and f.stream in ("downstream", "both") for f in s.faults)
        for s in schedules
    ]
    kinds = [frozenset(f"{f.link}:{f.kind}" for f in s.faults) for s in schedules]
    starts = collections.Counter(
        p for s in schedules for p in {f.anchor.event if f.anchor else "clock" for f in s.faults}
    )
    per_kind = collections.Counter(k for ks in kinds for k in ks)
    pairs = {pair for ks in kinds for pair in itertools.combinations(sorted(ks), 2)}
    repeated = sum(
        1 for s in schedules if max(collections.Counter(f"{f.link}:{f.kind}" for f in s.faults).values(), default=0) > 1
    )
    return {
        "schedules": n,
        "with_faults": sum(1 for s in schedules if s.faults),
        "delivery_race": sum(races),
        "delivery_race_after_result": sum(anchored),
        "edge_blackhole": sum(blackhole),
        "p_delivery_race": sum(races) / n if n else 0.0,
        "p_delivery_race_after_result": sum(anchored) / n if n else 0.0,
        "distinct_kind_sets": len(set(kinds) - {frozenset()}),
        "distinct_kind_pairs": len(pairs),
        "same_kind_twice": repeated,
        "mean_faults": sum(len(s.faults) for s in schedules) / n if n else 0.0,
        "mean_kinds": sum(len(k) for k in kinds) / n if n else 0.0,
        "per_kind": dict(sorted(per_kind.items())),
        "per_start": dict(sorted(starts.items())),
    }


def show(label: str, t: dict[str, Any]) -> None:
    n = t["schedules"]
    print(f"{label}: {n} schedules, {t['with_faults']} with faults")
    print(
        f"  delivery race: {t['delivery_race']} (p = {t['p_delivery_race']:.4f}); anchored after a result: "
        f"{t['delivery_race_after_result']} (p = {t['p_delivery_race_after_result']:.4f}); "
        f"edge response blackhole: {t['edge_blackhole']}"
    )
    print(
        f"  distinct link:kind sets {t['distinct_kind_sets']}, pairs {t['distinct_kind_pairs']}, "
        f"schedules with one kind twice {t['same_kind_twice']}; per schedule {t['mean_faults']:.2f} faults of "
        f"{t['mean_kinds']:.2f} kinds"
    )
    print("  starts: " + ", ".join(f"{k} {v / n:.3f}" for k, v in t["per_start"].items()))
    print("  kinds:  " + ", ".join(f"{k} {v / n:.3f}" for k, v in t["per_kind"].items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", choices=("nightly", "ci"), default="nightly")
    parser.add_argument("--schedules", type=int, default=4000)
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--draw",
        choices=("trials", "schedules"),
        default="trials",
        help="whole trials' schedules (what a trial meets) or fault_schedules alone",
    )
    parser.add_argument("--source", type=Path, help="sample another checkout's strategies (a git worktree)")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--dump", action="store_true", help=argparse.SUPPRESS)  # the child's side of --source
    args = parser.parse_args()
    if args.dump:
        import faultload

        source = Path(SOURCE or REPO).resolve()
        if not Path(faultload.__file__).resolve().is_relative_to(source):
            raise SystemExit(f"faultload came from {faultload.__file__}, not {source}")
        for data in sample(args.limits, args.schedules, args.time_scale, args.seed, args.draw):
            print(json.dumps(data, sort_keys=True))
        return 0
    from faultload.model.faults import FaultSchedule  # local import: never in the --source child

    raw = (
        sample_from(args.source.resolve(), args)
        if args.source
        else sample(args.limits, args.schedules, args.time_scale, args.seed, args.draw)
    )
    result = tally([FaultSchedule.from_dict(d) for d in raw], args.time_scale)
    show(f"{args.source or REPO} --limits {args.limits} --draw {args.draw} --time-scale {args.time_scale}", result)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
