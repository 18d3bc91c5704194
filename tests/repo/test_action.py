"""faultload's GitHub action (action.yml) and the example workflows a server repository copies.

The files are checked against GitHub's schemas (check-jsonschema's vendored copies: no network) and the
workflows by actionlint; the action's run steps read their inputs from env only, so
``scripts/action_steps.py`` runs them here exactly; the slow test runs them on a checkout of SkyRL 0.4.0's
sdist with a regression switch, and finds the JUnit file, the HTML page and a repro bundle.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, WORKDIR, require_built

ACTION = ROOT / "action.yml"
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.yml"))
WORKFLOWS = EXAMPLES + sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONLINT = WORKDIR / "tools" / "actionlint"
sys.path.insert(0, str(ROOT / "scripts"))
import action_steps  # noqa: E402


def _schema_check(schema: str, files: list[Path]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).with_name("check-jsonschema")), "--builtin-schema", schema, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_action_and_the_workflows_match_githubs_schemas() -> None:
    done = _schema_check("vendor.github-actions", [ACTION])
    assert done.returncode == 0, done.stdout + done.stderr
    done = _schema_check("vendor.github-workflows", WORKFLOWS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(EXAMPLES) == 2


def test_actionlint_finds_nothing_in_the_workflows() -> None:
    require_built("actionlint", ACTIONLINT.is_file(), "make test")
    done = subprocess.run([str(ACTIONLINT), *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_run_step_reads_its_inputs_from_env_and_every_input_is_used() -> None:
    action = yaml.safe_load(ACTION.read_text())
    steps = action["runs"]["steps"]
    used = set()
    for step in steps:
        text = json.dumps(step)
        used |= set(re.findall(r"inputs\.([\w-]+)", text))
        if "run" in step:
            assert "${{" not in step["run"], step.get("name")  # the script itself runs anywhere
            assert step.get("shell") == "bash"
    assert used == set(action["inputs"])


def test_the_guide_shows_the_pull_request_example_as_it_is() -> None:
    guide = (ROOT / "docs" / "guides" / "ci.md").read_text()
    pr = (ROOT / "docs" / "examples" / "faultload-pr.yml").read_text()
    assert pr.strip() in guide
    assert len([line for line in pr.splitlines() if not line.startswith("#")]) <= 12


def test_the_step_runner_fills_inputs_and_outputs_and_refuses_githubs_context() -> None:
    assert (
        action_steps.fill(
            "${{ inputs.profile }}-${{ steps.suite.outputs.exit-code }}",
            {"profile": "ci"},
            {"suite": {"exit-code": "3"}},
        )
        == "ci-3"
    )
    with pytest.raises(SystemExit, match="cannot fill"):
        action_steps.fill("${{ github.run_id }}", {}, {})
    with pytest.raises(SystemExit, match="unknown input 'nope'"):
        action_steps.inputs_of(action_steps.load_action(), {"nope": "1"})


def test_a_pull_requests_base_is_the_base_inputs_default() -> None:
    action = action_steps.load_action()
    pr = action_steps.inputs_of(action, {}, {"event.pull_request.base.sha": "4f2a9c1"})
    assert pr["base"] == "4f2a9c1" and pr["baseline"] == ""
    assert action_steps.inputs_of(action, {})["base"] == ""  # a push or a schedule: the head alone
    assert (
        action_steps.inputs_of(action, {"base": "none"}, {"event.pull_request.base.sha": "4f2a9c1"})["base"] == "none"
    )


SDIST = Path("/tmp/skyrl-src/skyrl-0.4.0")


@pytest.mark.slow
def test_the_actions_commands_on_the_sdist_checkout_write_junit_html_and_a_repro_bundle(tmp_path: Path) -> None:
    """The pull-request example's action, its commands run here in a scratch copy of the 0.4.0 sdist, with a
    regression switch so that a property fails: JUnit, HTML, summary and a repro with its bundle."""
    require_built(
        "the 0.4.0 sdist checkout (docs/guides/ci.md)",
        (SDIST / "pyproject.toml").is_file(),
        "pip download --no-deps --no-binary :all: --ignore-requires-python skyrl==0.4.0",
    )
    work = tmp_path / "fl"
    work.mkdir()
    for shared in ("targets", "tools"):  # installed once, as the action's cache would hold them
        (work / shared).symlink_to(WORKDIR / shared, target_is_directory=True)
    reports = tmp_path / "reports"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "action_steps.py"),
            "--with",
            f"target=skyrl@{SDIST}",
            "--with",
            f"workdir={work}",
            "--with",
            f"reports={reports}",
            "--with",
            "regress=early-408",
            "--with",
            "baseline=none",
            "--with",
            "pytest-args=-k bounded_retries",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "faultload: the server is at fault" in done.stdout
    assert (reports / "junit.xml").is_file() and (reports / "faultload.html").is_file()
    summary = json.loads((reports / "summary.json").read_text())
    assert any(p["outcome"] == "failed" for p in summary["properties"])
    assert list((reports / "repros").glob("*.bundle")) and list((reports / "repros").glob("*.json"))
