"""Where faultload's settings file is: the one rule, for the CLI and the pytest plugin alike.

``[tool.faultload.budgets]`` and ``[tool.faultload.watchdog]`` live in a
``pyproject.toml``. The file is the one named explicitly (the CLI's
``--config``), else the nearest ``pyproject.toml`` holding a ``[tool.faultload]``
table in the start directory or above it, as ruff and black look for theirs;
none found: the built-in defaults. The start is the caller's: the CLI starts
in the current directory, the plugin in pytest's rootdir (where pytest itself
found the project's configuration). Stdlib only: the plugin and the load
workers import it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

FILE_NAME = "pyproject.toml"


def find_config(start: Path, explicit: str | Path | None = None) -> Path | None:
    """The settings file: ``explicit`` (ValueError when it is not a file), else the nearest
    ``pyproject.toml`` with a ``[tool.faultload]`` table from ``start`` upward, else None."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise ValueError(f"--config {explicit}: no such file")
        return path
    for folder in (start, *start.parents):
        path = folder / FILE_NAME
        if path.is_file() and _has_faultload_table(path):
            return path
    return None


def _has_faultload_table(path: Path) -> bool:
    """True when ``path`` has a ``[tool.faultload]`` table, or cannot be read as TOML (so the loader
    that reads it says what is wrong with it, rather than the search passing it by)."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return True
    tool = data.get("tool")
    return isinstance(tool, dict) and "faultload" in tool


def read_faultload_table(path: Path | None, name: str) -> dict:
    """``[tool.faultload.<name>]`` of ``path`` ({} when ``path`` is None or has none); one-line ValueError
    when the file cannot be read as TOML or the entry is not a table."""
    if path is None:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: cannot read [tool.faultload.{name}]: {exc}") from None
    table = data.get("tool", {}).get("faultload", {}).get(name, {})
    if not isinstance(table, dict):
        raise ValueError(f"{path}: [tool.faultload.{name}] is not a table")
    return table
