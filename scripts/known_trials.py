"""Run a profile's known trials on one target, each judged, without the rest of the suite's session.

    .faultload/venv/bin/python scripts/known_trials.py --target hatchery==0.3.0 --fix sampling-session-answer
    .faultload/venv/bin/python scripts/known_trials.py --target tuft==0.2.2 --list

The suite runs a profile's known trials (``faultload.strategies.known``) first, each for the properties that
name it; a new family's adapter is first asked whether it serves them at all. This prints, per trial, whether
the family's contract and traits let it run (and why not), and with no ``--list`` runs each on a fresh stack:
its requests, wall, and which invariants held, were not judged or were violated. Exit 1 when one was violated.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from faultload.checker.budgets import Budgets
from faultload.checker.judge import judge
from faultload.host.workspace import Workspace
from faultload.model.family import TRAITS
from faultload.model.target import parse_target
from faultload.run.trial import run_trial
from faultload.strategies.known import known_trial_config
from faultload.suite.profiles import PROFILES, get_profile
from faultload.suite.properties import PROPERTIES, Property, property_limits


def owner(name: str) -> Property:
    """The property whose known trials include ``name``: the limits the suite draws it under."""
    return next((prop for prop in PROPERTIES if name in prop.known), PROPERTIES[0])


def planned(target: str, profile_name: str, fixes: tuple[str, ...]) -> list[tuple[str, object, str]]:
    """(name, config or None, why not) for each of the profile's known trials on ``target``; ValueError for a
    target or a fix its family does not have."""
    family = parse_target(target).family
    unknown = [fix for fix in fixes if family not in TRAITS or fix not in TRAITS[family].fixes]
    if unknown:
        raise ValueError(f"{target} has no fix switch {unknown[0]!r}")
    profile = get_profile(profile_name)
    out = []
    for name in profile.known_examples:
        config = known_trial_config(name, target, profile.time_scale, (), property_limits(profile, owner(name), target))
        if config is None:
            out.append((name, None, "not servable by the family's contract"))
            continue
        config = dataclasses.replace(config, fixes=fixes)
        try:
            config.validate()
        except ValueError as exc:
            out.append((name, None, f"not runnable on this family: {exc}"))
            continue
        out.append((name, config, ""))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="e.g. hatchery==0.3.0")
    parser.add_argument("--fix", action="append", default=[], help="a candidate fix the launcher applies")
    parser.add_argument("--profile", default="nightly", choices=sorted(PROFILES))
    parser.add_argument("--workdir", default=".faultload", help="the installed targets and tools")
    parser.add_argument("--list", action="store_true", help="say which would run, run none")
    parser.add_argument("--only", default="", help="comma-separated known trials to run; the others are skipped")
    args = parser.parse_args(argv)
    only = {name for name in args.only.split(",") if name}
    try:
        plan = planned(args.target, args.profile, tuple(args.fix))
    except ValueError as exc:
        print(f"known_trials: {exc}", file=sys.stderr)
        return 2
    unknown_names = only - {name for name, _, _ in plan}
    if unknown_names:
        print(
            f"known_trials: --only names no known trial of {args.profile}: {', '.join(sorted(unknown_names))}",
            file=sys.stderr,
        )
        return 2
    violated = False
    for name, config, why in plan:
        if only and name not in only:
            print(f"{name}: skipped (not in --only)", flush=True)
            continue
        if config is None:
            print(f"{name}: skipped ({why})", flush=True)
            continue
        if args.list:
            print(f"{name}: runs ({config.shape.requests} requests)", flush=True)
            continue
        started = time.monotonic()
        result = run_trial(config, Workspace.default(Path(args.workdir)))
        verdicts = judge(result, Budgets())
        bad = [v for v in verdicts if v.ok is False]
        unknown = [v.name for v in verdicts if v.ok is None]
        held = sum(1 for v in verdicts if v.ok)
        error = f", harness error: {result.error}" if result.error else ""
        print(
            f"{name}: {config.shape.requests} requests, {time.monotonic() - started:.0f} s{error}; held {held}, "
            f"not judged {len(unknown)} ({', '.join(unknown) or 'none'}), violated {len(bad)}",
            flush=True,
        )
        for verdict in bad:
            print(f"    VIOLATED {verdict.name}: {verdict.detail[:240]}", flush=True)
        violated = violated or bool(bad) or bool(result.error)
    return 1 if violated else 0


if __name__ == "__main__":
    sys.exit(main())
