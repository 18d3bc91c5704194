"""Make the comparisons page's before/after tables with `faultload compare`, not by hand.

Each comparison below runs `faultload compare` (its JSON and Markdown go to
--out), and the Markdown replaces what is between its markers in
docs/results/comparisons.md:

    <!-- compare:NAME -->
    ...generated...
    <!-- /compare:NAME -->

Usage: .faultload/venv/bin/python scripts/compare_tables.py [--only NAME,...] [--repeats N] [--out DIR]
       [--splice-only]   (splice the Markdown already in --out, run nothing)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from faultload.compare.rows import COMPARE_TRIAL, LONG_RESULT_TRIAL  # noqa: E402 (the checkout's, not an install's)

BARRIER_4096 = list(COMPARE_TRIAL)  # the matrix's comparison rows run the same trials
LONG_RESULTS = list(LONG_RESULT_TRIAL)
# latency mode (256 generations at once, 1 s each) under the SDK-like cap of 2,000 outstanding
LATENCY_SDK_CAP = ["--requests", "4096", "--router-mode", "latency", "--max-outstanding", "2000"]
RELEASE = "skyrl==0.4.0"
COMPARISONS: dict[str, tuple[str, str, list[str]]] = {
    "0.3.0-0.4.0-barrier": ("skyrl==0.3.0", RELEASE, BARRIER_4096),
    "0.3.0-0.4.0-latency": ("skyrl==0.3.0", RELEASE, LATENCY_SDK_CAP),
    "a-a-barrier": (RELEASE, RELEASE, BARRIER_4096),
    "rich-access-log": (RELEASE, RELEASE + "+regress=rich-access-log", BARRIER_4096),
    "httpx-forwarding": (RELEASE, RELEASE + "+regress=httpx-forwarding", LONG_RESULTS),
    "a-a-long-result": (RELEASE, RELEASE, LONG_RESULTS),
    "proto-per-poll": (RELEASE, RELEASE + "+regress=proto-per-poll", LONG_RESULTS),
    "json-decode": (RELEASE, RELEASE + "+regress=json-decode", LONG_RESULTS),
}


def run(name: str, repeats: int, out: Path) -> int:
    baseline, candidate, trial = COMPARISONS[name]
    command = [
        sys.executable,
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
        str(out / f"{name}.json"),
        "--markdown-out",
        str(out / f"{name}.md"),
        "--plot",
        str(out / f"{name}.png"),
    ]
    print(" ".join(command[1:]), file=sys.stderr, flush=True)
    return subprocess.run(command, cwd=ROOT).returncode


def splice(readme: str, name: str, table: str) -> str:
    """``readme`` with the text between ``name``'s markers replaced by ``table`` (ValueError: no markers)."""
    begin, end = f"<!-- compare:{name} -->", f"<!-- /compare:{name} -->"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(readme):
        raise ValueError(f"the comparisons page has no {begin} ... {end} markers")
    return pattern.sub(lambda _: f"{begin}\n{table.strip()}\n{end}", readme, count=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(COMPARISONS), help="comparisons to run, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "docs" / "compare"))
    parser.add_argument("--splice-only", action="store_true")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in COMPARISONS]
    if unknown:
        print(f"compare_tables: unknown comparison {unknown[0]!r}; known: {', '.join(COMPARISONS)}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    codes = {} if args.splice_only else {name: run(name, args.repeats, out) for name in names}
    readme_path = ROOT / "docs" / "results" / "comparisons.md"
    readme = readme_path.read_text()
    for name in names:
        table = out / f"{name}.md"
        if table.exists():
            readme = splice(readme, name, table.read_text())
    readme_path.write_text(readme)
    bad = {n: c for n, c in codes.items() if c not in (0, 1)}  # 1 is a verdict (something worse), not a failure
    for name, code in bad.items():
        print(f"compare_tables: {name}: faultload compare exited {code}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
