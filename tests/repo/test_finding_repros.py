"""The finding repros faultload ships (``faultload replay NAME``): each loads as a repro and is named, with the
command that replays it, on the findings page, so a user who reads of a finding can replay it by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultload.store.repro import FINDING_REPROS, finding_repro_names, load_repro

FINDINGS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "results" / "findings.md"


@pytest.mark.parametrize("name", finding_repro_names())
def test_each_shipped_repro_loads_and_the_findings_page_replays_it(name: str) -> None:
    data, config, _ = load_repro(FINDING_REPROS / f"{name}.json")
    assert config.target == data["target"]
    assert data["failing"] or data.get("refused"), f"{name}: a finding's repro records what failed"
    page = " ".join(FINDINGS_PAGE.read_text().split())  # a command may wrap across lines
    assert f"faultload replay {name}" in page, f"{name} is not replayed on the findings page"
