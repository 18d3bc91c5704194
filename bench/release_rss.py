"""What a server still holds once its results are past their TTL, side by side: a clean target and one that keeps them.

Calibrates ``releases_results`` (``release_held_per_delivered``): runs the same
``faultload run`` trial against the clean target and with ``--regress``
switches (default ``keep-delivered``: a store that never evicts a delivered
result), alternating N times each, each on a fresh stack, then holds the idle
server ``--hold`` seconds while the monitor samples its RSS. Per trial it prints
the RSS at the start, at its peak and after the release was due, the result
bytes delivered, and ``releases_results``'s figure (MiB held per MiB
delivered) and verdict.

Usage: .faultload/venv/bin/python bench/release_rss.py [--repeats N] [--hold S] [--regress NAME ...] [faultload run args...]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _trial import checked, fresh_stack  # noqa: E402

from faultload.checker.budgets import MIB, Budgets  # noqa: E402
from faultload.checker.judge import judge  # noqa: E402
from faultload.host.workspace import Workspace  # noqa: E402
from faultload.run.trial import run_trial  # noqa: E402


def one_trial(run_args: list[str], mode: list[str], hold_s: float, workspace: Workspace) -> dict[str, Any]:
    with fresh_stack([*run_args, *mode], workspace) as (config, stack):
        result = checked(run_trial(dataclasses.replace(config, hold_s=hold_s), workspace, stack=stack))
    verdict = next(v for v in judge(result, Budgets()) if v.name == "releases_results")
    rss = result.monitor.samples["rss"]
    rss = rss[rss >= 0]
    base = result.monitor.baseline.rss if result.monitor.baseline else float(rss[0])
    delivered = float(result.history["result_bytes"].astype(np.float64).sum())
    return {
        "mode": " ".join(mode).replace("--regress ", "") or "clean",
        "base": base / MIB,
        "peak": float(rss.max()) / MIB,
        "last": float(rss[-1]) / MIB,
        "delivered": delivered / MIB,
        "figure": verdict.figure,
        "ok": verdict.ok,
        "detail": verdict.detail,
    }


def _row(label: str, r: dict[str, Any]) -> str:
    figure = "-" if r["figure"] is None else f"{r['figure']:.3f}"
    return (
        f"{label:<7}{r['mode']:>22}  {r['base']:>8.1f}  {r['peak']:>8.1f}  {r['last']:>8.1f}  "
        f"{r['delivered']:>9.1f}  {figure:>7}  {str(r['ok']):>5}"
    )


HEADER = (
    f"{'':<7}{'mode':>22}  {'base MiB':>8}  {'peak MiB':>8}  {'end MiB':>8}  {'deliv MiB':>9}  {'figure':>7}  {'ok':>5}"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--hold", type=float, default=20.0, help="post-load hold, seconds")
    parser.add_argument("--regress", action="append", default=None)
    parser.add_argument("--verbose", action="store_true", help="print each verdict's detail")
    known, rest = parser.parse_known_args()
    other = [arg for name in known.regress or ["keep-delivered"] for arg in ("--regress", name)]
    modes: tuple[list[str], list[str]] = ([], other)
    workspace = Workspace.default(os.environ.get("FAULTLOAD_HOME"))
    print(
        "faultload run",
        " ".join(rest),
        f"hold {known.hold:g} s | as given vs with",
        " ".join(other),
        "x",
        known.repeats,
        flush=True,
    )
    print(HEADER, flush=True)
    for i in range(known.repeats):
        for m in (0, 1) if i % 2 == 0 else (1, 0):
            r = one_trial(rest, modes[m], known.hold, workspace)
            print(_row(f"run {i + 1}", r), flush=True)
            if known.verbose:
                print("   ", r["detail"], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
