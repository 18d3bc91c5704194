"""The X.Y.Z a checkout states, read from its files, and the pins a checkout is installed with."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultload.model.target import parse_target
from faultload.targets.families.skyrl import DEFAULT_PINS, RELEASE_PINS, SERVER_REQUIREMENTS, SkyrlFamily
from faultload.targets.versions import checkout_version, release_of

DYNAMIC = '[project]\nname = "skyrl"\ndynamic = ["version"]\n[tool.setuptools.dynamic]\nversion = {attr = "skyrl.__version__"}\n'


def _checkout(tmp_path: Path, pyproject: str, init: str | None) -> Path:
    (tmp_path / "pyproject.toml").write_text(pyproject)
    if init is not None:
        (tmp_path / "skyrl").mkdir()
        (tmp_path / "skyrl" / "__init__.py").write_text(init)
    return tmp_path


@pytest.mark.parametrize(
    "pyproject, init, says",
    [
        ('[project]\nname = "skyrl"\nversion = "0.4.0"\n', None, "0.4.0"),
        (DYNAMIC, '"""skyrl"""\n__version__ = "0.4.0"\n', "0.4.0"),  # SkyRL's own form
        (DYNAMIC, "__version__: str = '0.5.0.dev2'\n", "0.5.0"),
        (DYNAMIC, "VERSION = '0.4.0'\n", None),
        (DYNAMIC, None, None),
        ('[project]\nname = "skyrl"\ndynamic = ["version"]\n', "__version__ = '0.4.0'\n", None),  # no attr named
        ("not toml [", None, None),
    ],
)
def test_a_checkout_states_its_version_literally_or_through_its_version_attribute(
    tmp_path, pyproject, init, says
) -> None:
    assert checkout_version(_checkout(tmp_path, pyproject, init)) == says


def test_release_of_takes_the_x_y_z_a_version_starts_with() -> None:
    assert release_of("0.4.0.dev3+g1") == "0.4.0" and release_of("main") is None and release_of(None) is None


def test_a_checkout_is_installed_with_the_pins_of_the_release_it_states(tmp_path) -> None:
    """A 0.4.0 checkout got no transformers pin and the newest one (5.25 against the release's 5.16.1): its
    comparison with 0.4.0 weighed the index's drift."""
    path = _checkout(tmp_path, DYNAMIC, '__version__ = "0.4.0"\n')
    family = SkyrlFamily()
    assert family.requirements(parse_target(f"skyrl@{path}")) == SERVER_REQUIREMENTS + RELEASE_PINS["0.4.0"]
    assert family.requirements(parse_target("skyrl==0.4.0")) == SERVER_REQUIREMENTS + RELEASE_PINS["0.4.0"]
    (path / "skyrl" / "__init__.py").write_text('__version__ = "9.9.9"\n')
    assert family.requirements(parse_target(f"skyrl@{path}")) == SERVER_REQUIREMENTS + DEFAULT_PINS
