"""The baseline a checkout is compared with on ci when none is given: its own release, when installed.

A pull request's cost regression (CPU, memory, latency per request) passes
every absolute budget on ci's small trials; only a comparison with the build
it changes sees it. So a ``skyrl@PATH`` target on the ci profile runs the
comparative property against ``skyrl==<the checkout's version>`` when that
release is installed in the workspace, and the session says which (or why
not). ``--faultload-baseline none`` turns it off.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from faultload.model.build import Build, parse_build
from faultload.model.target import parse_target
from faultload.targets.install import is_installed

# What --faultload-baseline takes to compare with nothing.
NO_BASELINE = "none"
_RELEASE = re.compile(r"^(\d+\.\d+\.\d+)")


def checkout_version(path: str) -> str | None:
    """The X.Y.Z of a checkout's ``[project] version`` (None when it has none, or a dynamic one)."""
    try:
        data = tomllib.loads((Path(path) / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    match = _RELEASE.match(str(data.get("project", {}).get("version", "")))
    return match.group(1) if match else None


def default_baseline(target: str, profile: str, targets_dir: Path) -> tuple[Build | None, str]:
    """(the build to compare ``target`` with, a line saying so or why not); (None, "") when none is due."""
    spec = parse_target(target)
    if spec.kind != "checkout" or profile != "ci":
        return None, ""
    version = checkout_version(str(spec.path))
    if version is None:
        return None, f"not compared with a release: {spec.path}/pyproject.toml states no X.Y.Z version"
    release = f"{spec.family}=={version}"
    if not is_installed(targets_dir, parse_target(release)):
        return None, (f"not compared with its release {release}: not installed (faultload setup --target {release},"
                      " or --faultload-baseline BUILD)")
    return parse_build(release), f"compared with its release {release} by default (--faultload-baseline none: not)"
