"""Run faultload's GitHub action (action.yml) step by step here, as its commands: what a job would run.

The action's ``uses:`` steps are GitHub's (set up Python and Go, cache, upload): here Python and Go are this
machine's and the reports stay in their folder. Each ``run:`` step runs with the env the action gives it,
its ``${{ inputs.X }}`` filled from ``--with X=VALUE`` (else the input's default) and ``${{ steps... }}``
from the outputs the earlier steps wrote, in the current folder as the job's workspace (the server's checkout).

Usage: python scripts/action_steps.py [--with NAME=VALUE ...] [--github event.pull_request.base.sha=SHA]
       [--step-summary FILE]
Exit: the last step's (the suite's code: 0 clean, 1 the server is at fault, 3 the harness failed).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")
# The runner's temp folder (RUNNER_TEMP): one path, kept, as a runner's is: the base's checkout goes there and its
# venv, named by that path, is installed once
RUNNER_TEMP = Path(tempfile.gettempdir()) / "faultload-action-steps"


def load_action(path: Path = ROOT / "action.yml") -> dict:
    return yaml.safe_load(path.read_text())


def inputs_of(action: dict, given: dict[str, str], github: dict[str, str] | None = None) -> dict[str, str]:
    """Every input's value: given, else its default (a default's ``${{ github.X }}`` from ``github``, else
    empty, as GitHub gives it outside a pull request); an input the action does not have is refused."""
    unknown = sorted(set(given) - set(action["inputs"]))
    if unknown:
        raise SystemExit(f"action_steps: unknown input {unknown[0]!r}; known: {', '.join(action['inputs'])}")
    context = github or {}

    def default(spec: dict) -> str:
        return EXPRESSION.sub(
            lambda m: (
                context.get(m.group(1).removeprefix("github."), "") if m.group(1).startswith("github.") else m.group(0)
            ),
            str(spec.get("default", "")),
        )

    return {name: given.get(name, default(spec)) for name, spec in action["inputs"].items()}


def fill(text: str, inputs: dict[str, str], outputs: dict[str, dict[str, str]]) -> str:
    """``${{ inputs.X }}`` and ``${{ steps.ID.outputs.X }}`` filled in; any other expression is refused (a
    step that needs GitHub's context cannot run here as it would there)."""

    def value(match: re.Match) -> str:
        expr = match.group(1)
        if expr.startswith("inputs."):
            return inputs[expr.removeprefix("inputs.")]
        step = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
        if step:
            return outputs.get(step.group(1), {}).get(step.group(2), "")
        raise SystemExit(f"action_steps: cannot fill {match.group(0)} outside GitHub")

    return EXPRESSION.sub(value, text)


def run_steps(action: dict, inputs: dict[str, str], log=print, step_summary: Path | None = None) -> int:
    """Each ``run:`` step in order, as GitHub would run it with ``shell: bash``; the last step's exit code.
    ``step_summary``: the job summary's file (``GITHUB_STEP_SUMMARY``); the runner's temp folder is
    :data:`RUNNER_TEMP`."""
    outputs: dict[str, dict[str, str]] = {}
    code = 0
    runner_temp = str(RUNNER_TEMP)
    RUNNER_TEMP.mkdir(exist_ok=True)
    for step in action["runs"]["steps"]:
        if "run" not in step:
            log(f"action_steps: skipped (GitHub's own): {step.get('name') or step['uses']}")
            continue
        log(f"action_steps: {step.get('name') or step.get('id')}")
        with tempfile.NamedTemporaryFile("r", suffix=".out", delete=False) as out:
            env = {
                **os.environ,
                "GITHUB_ACTION_PATH": str(ROOT),
                "GITHUB_OUTPUT": out.name,
                "RUNNER_TEMP": runner_temp,
                **({"GITHUB_STEP_SUMMARY": str(step_summary)} if step_summary is not None else {}),
                **{k: fill(str(v), inputs, outputs) for k, v in (step.get("env") or {}).items()},
            }
            code = subprocess.run(["bash", "-e", "-c", fill(step["run"], inputs, outputs)], env=env).returncode
            written = Path(out.name).read_text()
        os.unlink(out.name)
        if "id" in step:
            outputs[step["id"]] = dict(line.split("=", 1) for line in written.splitlines() if "=" in line)
        if code != 0 and step is not action["runs"]["steps"][-1]:
            log(f"action_steps: step failed (exit {code})")
            return code
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--with",
        dest="given",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an input of the action (repeatable; default: the input's default)",
    )
    parser.add_argument(
        "--github",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a value of GitHub's context for the inputs' defaults, e.g. event.pull_request.base.sha=SHA "
        "(repeatable; default: empty, as outside a pull request)",
    )
    parser.add_argument("--step-summary", type=Path, default=None, help="the job summary's file (default: none)")
    args = parser.parse_args(argv)
    given = dict(item.split("=", 1) for item in args.given)
    github = dict(item.split("=", 1) for item in args.github)
    action = load_action()
    return run_steps(
        action,
        inputs_of(action, given, github),
        log=lambda m: print(m, file=sys.stderr, flush=True),
        step_summary=args.step_summary,
    )


if __name__ == "__main__":
    sys.exit(main())
