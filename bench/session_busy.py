"""How busy the machine is while a suite session runs, and what the session judged.

Runs a command (a ``pytest faultload ...`` session, or a ``faultload matrix`` run), samples the machine's CPU
from ``/proc/stat`` every ``--every`` seconds while it runs, and prints the session's wall, the mean and the
highest busy fraction of all cores over those samples, and — when the command wrote a session summary
(``--faultload-summary-json``, given with ``--summary``) — its trials run, trials judged and examples not run.
The machine is shared: run a before and an after on the same checkout back to back, each alone.

Usage: .faultload/venv/bin/python bench/session_busy.py [--every S] [--summary FILE] [--json-out FILE] -- COMMAND...
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STAT = Path("/proc/stat")


def cpu_times(path: Path = STAT) -> tuple[int, int]:
    """(busy, total) jiffies of all cores together, from the ``cpu`` line of ``/proc/stat``."""
    fields = [int(x) for x in path.read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_between(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The busy fraction of all cores between two readings."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def session_counts(summary: Path) -> dict[str, Any]:
    """Trials run, judged and examples not run, from a session's summary JSON."""
    data = json.loads(summary.read_text())
    props = data.get("properties", [])
    return {
        "trials": data.get("trials"),
        "judged_trials": data.get("judged_trials"),
        "not_run": sum(p.get("not_run", 0) for p in props),
        "outcomes": {p.get("name", p.get("nodeid")): p.get("outcome") for p in props},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples (default 5)")
    parser.add_argument("--summary", type=Path, help="the session's --faultload-summary-json, read at the end")
    parser.add_argument("--json-out", type=Path, help="write the figures as JSON here too")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("session_busy: no command given (put it after --)", file=sys.stderr)
        return 2
    started = time.monotonic()
    process = subprocess.Popen(command)
    samples: list[float] = []
    last = cpu_times()
    while True:
        try:
            process.wait(timeout=args.every)
            break
        except subprocess.TimeoutExpired:
            now = cpu_times()
            samples.append(busy_between(last, now))
            last = now
    figures: dict[str, Any] = {
        "command": command,
        "exit": process.returncode,
        "wall_s": round(time.monotonic() - started, 1),
        "samples": len(samples),
        "busy_mean": round(statistics.fmean(samples), 3) if samples else None,
        "busy_max": round(max(samples), 3) if samples else None,
    }
    if args.summary is not None and args.summary.exists():
        figures.update(session_counts(args.summary))
    print(json.dumps(figures, indent=2))
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
