"""What the documents say of the code's facts, held to the code: exit codes, server families, built tools.

The user-facing documents (README, CONTRIBUTING, docs/ but for the dated results pages, action.yml) state exit
codes in a few fixed phrasings; each is checked against ``faultload.cli.exits``: a harness failure is 3
everywhere, bad usage is the CLI's 2 or, said as pytest's, the suite's 4, an interrupt the CLI's 130 or pytest's
2, the server at fault 1. A sentence that lists what ``faultload setup`` builds names every tool it builds
(``faultload.setup.BUILT_TOOLS``); the action's target input names every server family.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from faultload.cli.exits import (
    EXIT_FAILED,
    EXIT_HARNESS,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    PYTEST_INTERRUPTED,
    PYTEST_USAGE,
)
from faultload.model.family import FAMILY_NAMES
from faultload.setup import BUILT_TOOLS
from tests.conftest import ROOT

DOCUMENTS = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "ARCHITECTURE.md", ROOT / "action.yml"]
    + [p for p in (ROOT / "docs").rglob("*.md") if "results" not in p.parts]
)
PYTEST_SAID = r"(\s*\(pytest's(?: own)? code\))?"
# (a code's phrasing, the code it must be, the code it must be when said as pytest's)
PHRASES = [
    (r"(?:the )?harness failed", EXIT_HARNESS, None),
    (r"bad usage", EXIT_USAGE, PYTEST_USAGE),
    (r"interrupted", EXIT_INTERRUPTED, PYTEST_INTERRUPTED),
    (r"(?:the )?server is at fault", EXIT_FAILED, None),
]


def _text(path: Path) -> str:
    return path.read_text().replace("**", "")


def code_claims(text: str) -> list[tuple[str, int, bool]]:
    """Every ``N <phrase>`` in ``text``: (the phrase's pattern, N, whether it was said as pytest's code)."""
    found = []
    for phrase, _, _ in PHRASES:
        for match in re.finditer(rf"(?<![\w.,])(\d+)\s+{phrase}{PYTEST_SAID}", text):
            found.append((phrase, int(match.group(1)), bool(match.group(2))))
    return found


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_exit_code_a_document_states_is_the_codes(path: Path) -> None:
    expected = {phrase: (plain, as_pytest) for phrase, plain, as_pytest in PHRASES}
    for phrase, number, pytest_said in code_claims(_text(path)):
        plain, as_pytest = expected[phrase]
        want = as_pytest if pytest_said and as_pytest is not None else plain
        assert number == want, f"{path.name}: '{number} {phrase}' — the code is {want}"


def test_the_claims_are_found_where_the_codes_are_listed() -> None:
    """The check above sees the listings it is meant to hold (not a pattern that matches nothing)."""
    claims = {(phrase, n) for path in DOCUMENTS for phrase, n, _ in code_claims(_text(path))}
    assert ("(?:the )?harness failed", 3) in claims and ("bad usage", 4) in claims and ("bad usage", 2) in claims
    assert code_claims("exit 1 the server is at fault, 7 bad usage (pytest's code)") == [
        ("bad usage", 7, True),
        ("(?:the )?server is at fault", 1, False),
    ]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_sentence_on_what_setup_builds_names_every_tool(path: Path) -> None:
    words = [tool.split()[-1] for tool in BUILT_TOOLS]  # Toxiproxy, router, client
    prose = re.sub(r"```.*?```", " ", path.read_text(), flags=re.S)  # a code block is commands, not a statement
    for sentence in re.split(r"(?<=[.;:])\s", " ".join(prose.split())):
        named = [word for word in words if word in sentence]
        if re.search(r"\bbuild(s|ing)?\b", sentence) and len(named) >= 2:  # a list of what is built
            assert named == words, f"{path.name}: says what is built without {set(words) - set(named)}: {sentence}"


def test_the_actions_target_input_names_every_family() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    described = action["inputs"]["target"]["description"]
    assert all(family in described for family in FAMILY_NAMES), described
