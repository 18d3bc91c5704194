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


def output_folder_problem(path: str | Path) -> str | None:
    """Why a file cannot be written at ``path`` — ``no such directory: D`` or ``directory not writable: D`` (D
    as given) — or None: what an output option is checked with before the work, not after it."""
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        return f"no such directory: {Path(path).parent}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"directory not writable: {Path(path).parent}"
    return None
