"""Pull requests simulated outside GitHub: the action's steps on head commits beside a base commit.

Makes a git repository whose first commit is a server's source (``--source``: e.g. the SkyRL 0.4.0 sdist,
unpacked), then one branch per scenario with a one-line change of a file, and runs the action's steps
(``scripts/action_steps.py``, default inputs) in it on each head with the base commit as the pull request's
base. Prints per scenario the exit code, the wall and the job summary's first lines; writes each summary to
``--out``. The scenarios (SkyRL's files):

- ``comment``: a comment only (nothing the server does changes);
- ``cost``: the access log through the same RichHandler as the server's other records (~1.5 ms of event-loop
  CPU a request: a cost the comparison catches);
- ``early-408``: the long poll's hold cut from 300 to 1 SDK seconds (an invariant catches it: polls_held);
- ``plain``: finding 1's candidate fix as source (``rich_tracebacks`` off: the base's known violations fixed).

Usage: .faultload/venv/bin/python bench/pr_gate.py --source /tmp/skyrl-src/skyrl-0.4.0 --repo /tmp/pr-repo \
    --workdir /tmp/pr-work --out /tmp/pr-out [--scenario comment ...] [--with NAME=VALUE ...]
The machine is shared: run the scenarios one after another, nothing else beside them.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GIT = ["git", "-c", "user.name=faultload", "-c", "user.email=faultload@localhost"]
# scenario -> (file, the text replaced, its replacement, the commit's subject)
SCENARIOS: dict[str, tuple[str, str, str, str]] = {
    "comment": (
        "skyrl/tinker/api.py",
        "RETRIEVE_FUTURE_TIMEOUT_SECONDS = 300\n",
        "RETRIEVE_FUTURE_TIMEOUT_SECONDS = 300  # how long a poll waits for its result (SDK seconds)\n",
        "a comment only",
    ),
    "cost": (
        "skyrl/utils/log.py",
        '"class": "logging.StreamHandler",\n                "formatter": "default",\n'
        '                "stream": "ext://sys.stderr",',
        '"()": RichHandler, **RICH_HANDLER_KWARGS, "formatter": "default",',
        "the access log through the same RichHandler",
    ),
    "early-408": (
        "skyrl/tinker/api.py",
        "RETRIEVE_FUTURE_TIMEOUT_SECONDS = 300\n",
        "RETRIEVE_FUTURE_TIMEOUT_SECONDS = 1\n",
        "a shorter long-poll hold",
    ),
    "plain": ("skyrl/utils/log.py", '"rich_tracebacks": True,', '"rich_tracebacks": False,', "plain tracebacks"),
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def make_repo(source: Path, repo: Path) -> str:
    """The repository: the source as its base commit, one branch per scenario; the base commit's sha."""
    if repo.exists():
        shutil.rmtree(repo)
    shutil.copytree(source, repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"the base: {source.name}")
    base = git(repo, "rev-parse", "HEAD")
    for name, (path, old, new, subject) in SCENARIOS.items():
        git(repo, "checkout", "-q", "-b", name, base)
        text = (repo / path).read_text()
        if old not in text:
            raise SystemExit(f"pr_gate: {path} of {source} has no {old.splitlines()[0]!r}: another release?")
        (repo / path).write_text(text.replace(old, new, 1))
        git(repo, "commit", "-qam", subject)
    git(repo, "checkout", "-q", "main")
    return base


def run_scenario(repo: Path, base: str, name: str, workdir: Path, out: Path, given: list[str]) -> dict:
    git(repo, "checkout", "-q", name)
    reports, summary = out / name, out / f"{name}.summary.md"
    command = [sys.executable, str(ROOT / "scripts" / "action_steps.py"), "--with", f"target=skyrl@{repo}"]
    command += ["--with", f"workdir={workdir}", "--with", f"reports={reports}", "--with", "upload=false"]
    for item in given:
        command += ["--with", item]
    command += ["--github", f"event.pull_request.base.sha={base}", "--step-summary", str(summary)]
    started = time.monotonic()
    with open(out / f"{name}.log", "w") as log:
        code = subprocess.run(command, cwd=repo, stdout=log, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - started
    first = summary.read_text().splitlines()[0] if summary.exists() else "(no job summary)"
    return {"scenario": name, "exit": code, "wall_s": round(wall), "summary": first}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="the server's source: the base commit")
    parser.add_argument("--repo", type=Path, required=True, help="where the repository is made (replaced)")
    parser.add_argument("--workdir", type=Path, required=True, help="the action's workdir (FAULTLOAD_HOME)")
    parser.add_argument("--out", type=Path, required=True, help="the reports, logs and job summaries")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="default: every one")
    parser.add_argument("--with", dest="given", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    if not (args.source / "pyproject.toml").is_file():
        print(f"pr_gate: {args.source} has no pyproject.toml (the server's source)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    base = make_repo(args.source, args.repo)
    for name in args.scenario or list(SCENARIOS):
        row = run_scenario(args.repo, base, name, args.workdir, args.out, args.given)
        print(f"{row['scenario']}: exit {row['exit']} in {row['wall_s']} s; {row['summary']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
