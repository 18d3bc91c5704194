"""pytester tests of the faultload plugin's options: each one given alone takes effect, however the
properties were collected (``pytest --pyargs faultload.suite`` or a user's own property file).

Each session is an in-process pytest run (``pytester.runpytest_inprocess``)
with ``--collect-only``: no trial runs, nothing starts. A probe plugin
(``-p probe``) records, once collection is done, what the plugin resolved
(``plugin.options()``, the session's ``plugin.runner()``, which starts nothing
until a trial) and the collected properties' Hypothesis ``max_examples``.
pytester removes the modules a run imported (``faultload.suite.test_properties``
is imported afresh by each), and the plugin's per-session state is swapped for
a fresh one around each run, so this session's own plugin state is untouched.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from faultload.suite.profiles import get_profile
from tests.quality.fakes import isolate_plugin_state

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
CI = get_profile("ci")

PROBE = """
import json
from pathlib import Path


def pytest_collection_finish(session):
    from faultload.suite import plugin

    suite = plugin.runner()
    examples = {item.name: item.obj._hypothesis_internal_use_settings.max_examples for item in session.items
                if hasattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings")}
    Path(session.config.invocation_params.dir, "probe.json").write_text(json.dumps({
        "profile": plugin.options().profile.name, "max_examples": plugin.options().profile.max_examples,
        "workspace": str(suite.workspace.root), "shrink_s": suite.shrink_s, "property_examples": examples,
    }))
"""


def collect(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str, *options: str) -> dict:
    """What the plugin resolved in a session collecting the properties ``how`` with ``options``."""
    pytester.makepyfile(probe=PROBE)
    pytester.syspathinsert()
    isolate_plugin_state(monkeypatch)
    assert "faultload.suite.test_properties" not in sys.modules, "imported here: its options are stale"
    monkeypatch.delenv("FAULTLOAD_HOME", raising=False)
    monkeypatch.delenv("FAULTLOAD_PROFILE", raising=False)
    if how == "pyargs":
        where = ["--pyargs", "faultload.suite"]
    else:  # a user's own property file, as in the README
        shutil.copy(ROOT / "examples" / "test_big_results.py", pytester.path / "test_big_results.py")
        where = ["test_big_results.py"]
    result = pytester.runpytest_inprocess("-p", "probe", "-p", "no:cacheprovider", "--collect-only", "-q",
                                           *where, *options)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    return json.loads((pytester.path / "probe.json").read_text())


HOW = ["pyargs", "user-file"]


@pytest.mark.parametrize("how", HOW)
def test_examples_alone(pytester, monkeypatch, how: str) -> None:
    probe = collect(pytester, monkeypatch, how, "--faultload-examples", "3")
    assert (probe["profile"], probe["max_examples"]) == ("ci", 3)
    if how == "pyargs":  # the suite's properties draw that many (times their family's weight)
        assert probe["property_examples"]["test_all_invariants"] == 3
        assert probe["property_examples"]["test_no_lost_results"] == 6
    else:  # a user's own @settings are theirs
        assert probe["property_examples"] == {"test_big_results_keep_fds_bounded": 5}


@pytest.mark.parametrize("how", HOW)
def test_workdir_alone(pytester, monkeypatch, how: str) -> None:
    workdir = pytester.path / "my-faultload"
    probe = collect(pytester, monkeypatch, how, "--faultload-workdir", str(workdir))
    assert probe["workspace"] == str(workdir.resolve())
    assert probe["max_examples"] == CI.max_examples and probe["shrink_s"] == CI.shrink_s


@pytest.mark.parametrize("how", HOW)
def test_shrink_s_alone(pytester, monkeypatch, how: str) -> None:
    probe = collect(pytester, monkeypatch, how, "--faultload-shrink-s", "7.5")
    assert probe["shrink_s"] == 7.5
    assert probe["max_examples"] == CI.max_examples


def test_without_options_the_ci_profile_and_the_default_workdir(pytester, monkeypatch) -> None:
    probe = collect(pytester, monkeypatch, "pyargs")
    assert (probe["profile"], probe["max_examples"], probe["shrink_s"]) == ("ci", CI.max_examples, CI.shrink_s)
    assert probe["property_examples"]["test_all_invariants"] == CI.max_examples
    assert probe["workspace"] == str((pytester.path / ".faultload").resolve())
