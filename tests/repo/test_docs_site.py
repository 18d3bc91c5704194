"""The docs site builds strictly: every page in the nav, every link and anchor resolving (mkdocs build --strict).

It runs MkDocs itself (the `docs` extra, which `make setup` installs) on the repository's mkdocs.yml, into a
temporary folder, so a page moved without its links, or added without a nav entry, fails `make test`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "concepts" / "glossary" / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[gone](missing.md)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text("site_name: t\ndocs_dir: docs\nnav:\n  - Home: index.md\n")
    done = _build(config, tmp_path / "site")
    assert done.returncode != 0 and "missing.md" in done.stderr
