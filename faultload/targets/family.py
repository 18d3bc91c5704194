"""What faultload needs of a Tinker-API server family, as one interface; each family is a module behind it.

A family's adapter says what to install into a target's venv (its own package, released or checked out, and
what its sampling path imports; whether it shares the suite's torch) and launches a server of it with its
engine stubbed, faultload's router as its inference backend, the regression and fix switches applied and its
timers scaled, answering on ``/api/v1/healthz``. Its futures contract (poll hold, what a hold's end answers,
TTLs, session expiry, CPU per request) is ``faultload.model.family``'s alone, where the checker reads it.
SkyRL (``targets/families/skyrl.py``) is the first, TuFT (``targets/families/tuft.py``) the second, hatchery-core
(``targets/families/hatchery.py``) the third, twinkle-kit (``targets/families/twinkle.py``) the fourth; a family is a new module added to :data:`FAMILIES`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from faultload.model.family import FAMILY_NAMES
from faultload.model.target import TargetSpec
from faultload.targets.families.hatchery import HatcheryFamily
from faultload.targets.families.skyrl import SkyrlFamily
from faultload.targets.families.tuft import TuftFamily
from faultload.targets.families.twinkle import TwinkleFamily
from faultload.targets.server import ServerHandle


class ServerFamily(Protocol):
    name: str  # what a target spec starts with: NAME==X.Y.Z, NAME@PATH
    package: str  # its package on the index (a release's existence is asked there)
    needs_torch: bool  # the target venv sees the shared torch venv

    def requirements(self, spec: TargetSpec) -> list[str]:
        """pip requirements of what the server imports beside its own package, for this release or checkout."""

    def own_install(self, spec: TargetSpec) -> list[str]:
        """pip arguments that install the release or checkout itself."""

    def launch(
        self, spec: TargetSpec, python: Path, run_dir: Path, port: int, router_url: str, **options: Any
    ) -> ServerHandle:
        """Start a server on 127.0.0.1:``port`` whose inference goes to ``router_url``; return once it is healthy
        (ServerStartError with its log's tail when it is not)."""


FAMILIES: dict[str, ServerFamily] = {
    "skyrl": SkyrlFamily(),
    "tuft": TuftFamily(),
    "hatchery": HatcheryFamily(),
    "twinkle": TwinkleFamily(),
}
assert tuple(FAMILIES) == FAMILY_NAMES, "model.family.FAMILY_NAMES names the families targets/family.py has"


def family_of(spec: TargetSpec) -> ServerFamily:
    """The adapter of a release's or checkout's family (a url= target has none: someone else launched it)."""
    if spec.kind == "url":
        raise ValueError(f"{spec.text}: a server someone else started has no family adapter")
    return FAMILIES[spec.family]
