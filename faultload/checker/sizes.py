"""A byte size as a budget is written in pyproject.toml or on the command line: ``268435456``, ``256MiB``, ``1GiB``."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zA-Z]*)\s*$")


def parse_size(name: str, text: str) -> int:
    """Whole bytes from ``text``; ``name`` (the budget's) is only for the error."""
    match = _SIZE_RE.match(text)
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS:
        raise ValueError(f"budget {name}: {text!r} is not a size (e.g. 268435456, 256MiB, 1GiB, 64MB)")
    value = float(match.group(1)) * _UNITS[unit]
    if value != int(value):
        raise ValueError(f"budget {name}: {text!r} is not a whole number of bytes")
    return int(value)
