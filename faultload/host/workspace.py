"""Where faultload keeps what it installs and writes, under one root folder.

The root defaults to ``.faultload`` in the current directory (``make setup``
creates it in the checkout, ``faultload setup`` in whatever folder it runs
in) and can be moved with ``--workdir`` or the
``FAULTLOAD_HOME`` environment variable, which only the edges read (the CLI's
``main``, the plugin's ``pytest_configure``) and hand to :meth:`Workspace.default`.
Passed around as a value. :func:`output_folder_problem` is the one check of an output
option's folder (the CLI's and the plugin's), said before the work starts.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def default(cls, root: str | Path | None = None) -> "Workspace":
        """At ``root`` (a --workdir, or the caller's $FAULTLOAD_HOME), else ``.faultload`` here."""
        return cls(Path(root or ".faultload").resolve())

    @property
    def targets(self) -> Path:
        return self.root / "targets"

    @property
    def sdks(self) -> Path:
        """The SDK releases the sdk client runs besides the installed one, each in a venv of its own."""
        return self.root / "sdks"

    @property
    def tools(self) -> Path:
        return self.root / "tools"

    @property
    def repros(self) -> Path:
        """Where failing trials' repros (and their reports, bundles, pages) are written."""
        return self.root / "repros"

    @property
    def runs(self) -> Path:
        return self.root / "runs"


def output_folder_problem(path: str | Path, kind: str = "file") -> str | None:
    """Why ``path`` cannot be written — ``no such directory: D``, ``directory not writable: D (why)`` or ``is a
    directory`` (D as given) — or None: what an output option is checked with before the work, not after it.

    ``kind`` "dir": ``path`` is a folder the command fills (an existing one is written in, a new one is made
    in its parent). Writability is tried, not asked: ``os.access`` says yes to root for ``/proc`` and for a
    read-only mount, where a file then cannot be made; the probe file is removed at once.
    """
    given = Path(path)
    if kind == "file" and given.is_dir():
        return f"is a directory: {given}"
    folder = given if kind == "dir" and given.is_dir() else given.resolve().parent
    shown = given if folder == given else given.parent
    if not folder.is_dir():
        return f"no such directory: {shown}"
    try:
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".faultload-probe-")
    except OSError as exc:
        return f"directory not writable: {shown} ({exc.strerror or exc})"
    os.close(handle)
    os.unlink(probe)
    return None


# Every output option of every command (argparse dest -> "file" or "dir"): each is checked before any work
# (faultload.cli.main), whichever command has it.
OUTPUT_OPTIONS: dict[str, str] = {
    "json_out": "file",
    "junit_xml": "file",
    "html": "file",
    "plot": "file",
    "history": "file",
    "markdown_out": "file",
    "profile_server": "file",
    "bundle": "dir",
    "trials_out": "dir",
    "out": "dir",
    "logs": "dir",
    "repros": "dir",
}


def output_problems(values: dict[str, object]) -> str | None:
    """The first output option among ``values`` (dest -> path or None) that cannot be written, as
    ``--option: why``; None when every given one can."""
    for dest, kind in OUTPUT_OPTIONS.items():
        path = values.get(dest)
        problem = output_folder_problem(str(path), kind) if path else None
        if problem:
            return f"--{dest.replace('_', '-')}: {problem}"
    return None
