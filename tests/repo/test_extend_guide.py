"""The extending guide (docs/guides/extend.md) names files that exist, and counts them right.

A recipe that names a file that moved, or was renamed or split, sends the next contributor to the wrong place,
and nothing else would notice: the docs site's strict build checks links, not the paths a page quotes. So every
backticked repository path in the guide must exist; a path with a ``<name>`` placeholder is a file the recipe
creates, and must follow a pattern files already follow (``faultload/targets/<family>_launch.py``: a
``*_launch.py`` is there). Each recipe's "Files touched: N" must be the number of distinct paths it names, so a
step added without its file, or a file without its step, is caught too. Its relative links to other pages
resolve.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "extend.md"
SUFFIXES = (".py", ".go", ".md", ".toml", ".yml")
PLACEHOLDER = re.compile(r"<[^<>/]+>")
COUNT = re.compile(r"Files touched: (\d+)")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def repository_paths(text: str) -> list[str]:
    """The backticked spans of ``text`` that are a repository file: one word ending in a known suffix and holding a
    ``/``, or ``Makefile``; in order of appearance."""
    spans = re.findall(r"`([^`\s]+)`", text)
    return [s for s in spans if s == "Makefile" or ("/" in s and s.endswith(SUFFIXES))]


def sections(text: str) -> dict[str, str]:
    """The guide's ``## `` sections by heading (the text before the first is under "")."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {"": parts[0], **dict(zip(parts[1::2], parts[2::2]))}


def missing(path: str) -> bool:
    """Whether ``path`` names nothing in the repository: a plain path that is not a file, or a new file's path
    whose pattern (each ``<name>`` as ``*``) matches no file."""
    if PLACEHOLDER.search(path):
        return not any(p.is_file() for p in ROOT.glob(PLACEHOLDER.sub("*", path)))
    return not (ROOT / path).is_file()


def test_every_path_in_the_guide_exists() -> None:
    paths = sorted(set(repository_paths(GUIDE.read_text())))
    assert len(paths) > 20, f"too few paths found in {GUIDE}: {paths}"
    gone = [p for p in paths if missing(p)]
    assert not gone, f"{GUIDE.relative_to(ROOT)} names files that are not in the repository: {gone}"


def test_each_recipe_counts_the_files_it_names() -> None:
    recipes = {name: body for name, body in sections(GUIDE.read_text()).items() if COUNT.search(body)}
    assert len(recipes) == 3, f"expected three recipes with 'Files touched: N', found {list(recipes)}"
    wrong = []
    for name, body in recipes.items():
        stated = [int(n) for n in COUNT.findall(body)]
        paths = sorted(set(repository_paths(body)))
        if stated != [len(paths)]:
            wrong.append(f"{name!r} states {stated} files touched but names {len(paths)}: {paths}")
    assert not wrong, "; ".join(wrong)


def test_relative_links_resolve_and_the_page_is_in_the_nav() -> None:
    links = [link.split("#")[0] for link in LINK.findall(GUIDE.read_text())]
    relative = [link for link in links if link and not re.match(r"[a-z]+:", link)]
    broken = [link for link in relative if not (GUIDE.parent / link).is_file()]
    assert not broken, f"{GUIDE.relative_to(ROOT)} links to pages that do not exist: {broken}"
    assert "guides/extend.md" in (ROOT / "mkdocs.yml").read_text(), "extend.md is not in mkdocs.yml's nav"
