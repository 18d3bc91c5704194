"""The default baseline of a checkout on ci: the release its own venv reports, whatever its packaging states.

A checkout's venv is a folder as ``faultload setup`` leaves it (its stamp file, ``bin/python``); its python
is a TEST DOUBLE, a shell script that answers what a real one would print (or fails), so no package is
installed. :func:`ask_version` itself is run against this interpreter, for real.
"""

from __future__ import annotations

import stat
import sys
from importlib.metadata import version as installed
from pathlib import Path

from faultload.model.build import parse_build
from faultload.model.target import parse_target
from faultload.suite.baseline import ask_version, default_baseline, installed_version
from faultload.targets.install import STAMP


def _checkout(tmp_path: Path, project: str) -> str:
    path = tmp_path / "skyrl"
    path.mkdir()
    (path / "pyproject.toml").write_text(f'[project]\nname = "skyrl"\n{project}\n')
    return f"skyrl@{path}"


def _venv(targets: Path, name: str, prints: str | None = None) -> None:
    """A venv as ``is_installed`` reads it; ``prints``: its python (a TEST DOUBLE script) prints that and
    exits 0 (None: it fails, as a venv whose package cannot be imported)."""
    python = targets / name / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\necho '{prints}'\n" if prints is not None else "#!/bin/sh\nexit 1\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    (targets / name / STAMP).write_text("{}")


def test_a_dynamic_version_is_read_from_the_checkouts_own_venv(tmp_path) -> None:
    """SkyRL's own pyproject: ``dynamic = ["version"]``; its venv reports 0.4.0."""
    target, targets = _checkout(tmp_path, 'dynamic = ["version"]'), tmp_path / "targets"
    _venv(targets, parse_target(target).venv_name, "0.4.0")
    _venv(targets, "skyrl-0.4.0", "0.4.0")
    build, line = default_baseline(target, "ci", targets)
    assert build == parse_build("skyrl==0.4.0")
    assert line.startswith("compared with its release skyrl==0.4.0 by default (its venv reports 0.4.0;")


def test_a_dev_version_compares_with_the_release_it_starts_with(tmp_path) -> None:
    target, targets = _checkout(tmp_path, 'dynamic = ["version"]'), tmp_path / "targets"
    _venv(targets, parse_target(target).venv_name, "0.4.0.dev3+g1234abc")
    assert installed_version(parse_target(target), targets) == "0.4.0"


def test_a_venv_that_cannot_say_falls_back_to_the_literal_version(tmp_path) -> None:
    target, targets = _checkout(tmp_path, 'version = "0.4.0"'), tmp_path / "targets"
    _venv(targets, parse_target(target).venv_name, None)
    _venv(targets, "skyrl-0.4.0", "0.4.0")
    build, line = default_baseline(target, "ci", targets)
    assert build == parse_build("skyrl==0.4.0") and "(its pyproject.toml states 0.4.0;" in line


def test_neither_says_why_in_one_line(tmp_path) -> None:
    target, targets = _checkout(tmp_path, 'dynamic = ["version"]'), tmp_path / "targets"
    build, line = default_baseline(target, "ci", targets)
    spec = parse_target(target)
    assert build is None and "\n" not in line
    assert line == (
        f"not compared with a release: its venv is not installed (faultload setup --target {spec.text}),"
        f" and {spec.path}/pyproject.toml states no X.Y.Z version"
    )
    _venv(targets, spec.venv_name, "")
    assert default_baseline(target, "ci", targets)[1].startswith(
        "not compared with a release: its venv reports no X.Y.Z version, and "
    )


def test_the_question_is_asked_of_a_real_interpreter() -> None:
    assert ask_version(Path(sys.executable), "pytest") == installed("pytest")
    assert ask_version(Path(sys.executable), "no-such-package-here") is None
    assert ask_version(Path("/nonexistent/python"), "pytest") is None


def test_the_sessions_fixes_run_on_the_release_too(tmp_path) -> None:
    """--faultload-fix patches the server, not the checkout's change: both sides carry it."""
    target, targets = _checkout(tmp_path, 'dynamic = ["version"]'), tmp_path / "targets"
    _venv(targets, parse_target(target).venv_name, "0.4.0")
    _venv(targets, "skyrl-0.4.0", "0.4.0")
    build, line = default_baseline(target, "ci", targets, fixes=("retain-until-expiry", "plain-tracebacks"))
    assert build == parse_build("skyrl==0.4.0+fix=plain-tracebacks,retain-until-expiry")
    assert line.startswith(
        "compared with its release skyrl==0.4.0+fix=plain-tracebacks,retain-until-expiry "
        "by default (its venv reports 0.4.0; the session's fixes on both sides;"
    )
