"""The "Writing your own property" guide shows the file that runs (examples/test_big_results.py), verbatim."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_guide_shows_the_example_file_verbatim():
    readme = (ROOT / "docs" / "guides" / "own-property.md").read_text()
    marker = "# examples/test_big_results.py  (run: pytest examples/test_big_results.py --faultload-profile ci)\n"
    start = readme.index(marker) + len(marker)
    block = readme[start : readme.index("```", start)]
    assert block == (ROOT / "examples" / "test_big_results.py").read_text()
