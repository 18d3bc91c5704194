"""The baseline a checkout is compared with on ci when none is given: its own release, when installed.

A pull request's cost regression (CPU, memory, latency per request) passes
every absolute budget on ci's small trials; only a comparison with the build
it changes sees it. So a ``skyrl@PATH`` target on the ci profile runs the
comparative property against ``skyrl==<the checkout's version>`` when that
release is installed in the workspace, and the session says which (or why
not). ``--faultload-baseline none`` turns it off.

The checkout's version is the one its own venv reports (the checkout is
installed editable there: ``importlib.metadata``, else the package's
``__version__``), whatever its packaging states: SkyRL's ``pyproject.toml``
has ``dynamic = ["version"]`` (read from ``skyrl.__version__``); for a
checkout not installed yet the version its files state is the fallback
(:mod:`faultload.targets.versions`).

The session's ``--faultload-fix`` switches are faultload's patches of the
server, not the checkout's change: the default baseline carries them too, so
the comparison weighs the checkout's diff alone (with them on one side only,
a clean checkout run with the fixed row's fixes is compared with the unfixed
release and a ratio measures the patches).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from faultload.model.build import Build, parse_build
from faultload.model.target import TargetSpec, parse_target
from faultload.targets.family import family_of
from faultload.targets.install import is_installed, target_python
from faultload.targets.versions import checkout_version, release_of

# What --faultload-baseline takes to compare with nothing.
NO_BASELINE = "none"
# Run by the checkout's venv python: its package's installed version, else its __version__ (argv[1]: the package).
_ASK_VERSION = """import importlib, importlib.metadata, sys
try:
    print(importlib.metadata.version(sys.argv[1]))
except importlib.metadata.PackageNotFoundError:
    print(getattr(importlib.import_module(sys.argv[1]), "__version__", ""))
"""
# Importing a package may import its dependencies (torch, for some): bounded, never a hang of the session.
ASK_TIMEOUT_S = 60.0

Ask = Callable[[Path, str], "str | None"]


def ask_version(python: Path, package: str) -> str | None:
    """The version ``package`` reports in the interpreter ``python`` (None when it cannot say)."""
    try:
        proc = subprocess.run(
            [str(python), "-c", _ASK_VERSION, package], capture_output=True, text=True, timeout=ASK_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[-1].strip() if proc.returncode == 0 and lines else None


def installed_version(spec: TargetSpec, targets_dir: Path, ask: Ask = ask_version) -> str | None:
    """The X.Y.Z the checkout's own venv reports for its family's package (None: not installed, or no answer)."""
    if not is_installed(targets_dir, spec):
        return None
    return release_of(ask(target_python(targets_dir, spec), family_of(spec).package))


def default_baseline(
    target: str, profile: str, targets_dir: Path, ask: Ask = ask_version, fixes: tuple[str, ...] = ()
) -> tuple[Build | None, str]:
    """(the build to compare ``target`` with, a line saying so or why not); (None, "") when none is due.
    ``fixes``: the session's fixes, which the release runs with too."""
    spec = parse_target(target)
    if spec.kind != "checkout" or profile != "ci":
        return None, ""
    version, source = installed_version(spec, targets_dir, ask), "its venv reports"
    if version is None:
        version, source = checkout_version(spec.path), "its pyproject.toml states"
    if version is None:
        installed = (
            "reports no X.Y.Z version"
            if is_installed(targets_dir, spec)
            else (f"is not installed (faultload setup --target {spec.text})")
        )
        return None, (
            f"not compared with a release: its venv {installed}, and {spec.path}/pyproject.toml states no X.Y.Z version"
        )
    release = f"{spec.family}=={version}"
    if not is_installed(targets_dir, parse_target(release)):
        return None, (
            f"not compared with its release {release}: not installed (faultload setup --target {release},"
            " --faultload-baseline BUILD, or --faultload-baseline none: do not compare)"
        )
    build = parse_build(release + (f"+fix={','.join(fixes)}" if fixes else ""))
    return build, (
        f"compared with its release {build.text} by default ({source} {version};"
        + (" the session's fixes on both sides;" if fixes else "")
        + " --faultload-baseline none: not)"
    )
