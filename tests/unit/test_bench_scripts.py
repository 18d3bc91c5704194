"""Every script under bench/ still imports: they run by hand, so a renamed module would break them unseen."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))


def test_there_are_bench_scripts():
    assert len(SCRIPTS) >= 10, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_a_bench_script_imports(script: Path, monkeypatch: pytest.MonkeyPatch):
    """The module's top level (its imports) runs; ``main`` does not. A script whose optional extra is missing
    says which, and how to install it."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:  # an optional extra not installed
        assert "pip install -e '.[bench]'" in str(exc), exc
        pytest.skip(str(exc))
