"""The X.Y.Z a checkout states, read from its files before anything is installed.

A checkout's dependencies are pinned as the release it states (a 0.4.0 checkout
runs with 0.4.0's pins), so a comparison with that release weighs the checkout's
change, not what the package index served on the day each venv was made; the
suite's default baseline falls back to it too. SkyRL's ``pyproject.toml`` has
``dynamic = ["version"]`` from ``skyrl.__version__``: a literal ``[project]
version`` is read first, else the ``__version__`` string of the attribute
``[tool.setuptools.dynamic]`` names (read as text: importing it would import
torch).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

_RELEASE = re.compile(r"^(\d+\.\d+\.\d+)")
_VERSION_LINE = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']""", re.MULTILINE)


def release_of(version: str | None) -> str | None:
    """The X.Y.Z a version string starts with (``0.4.0.dev3`` -> ``0.4.0``), None when it has none."""
    match = _RELEASE.match(version or "")
    return match.group(1) if match else None


def checkout_version(path: Path | str) -> str | None:
    """The X.Y.Z a checkout's ``pyproject.toml`` states, literally or through its dynamic version attribute."""
    root = Path(path)
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    literal = release_of(str(data.get("project", {}).get("version", "")))
    if literal is not None:
        return literal
    attr = data.get("tool", {}).get("setuptools", {}).get("dynamic", {}).get("version", {})
    name = attr.get("attr", "") if isinstance(attr, dict) else ""
    if not name.endswith(".__version__"):
        return None
    module = root.joinpath(*name.removesuffix(".__version__").split("."))
    for candidate in (module / "__init__.py", module.with_suffix(".py")):
        try:
            found = _VERSION_LINE.search(candidate.read_text())
        except OSError:
            continue
        return release_of(found.group(1)) if found else None
    return None
