"""Function-local imports of the harness: the rule "function-local imports <= 10 in all, each with a
reason" is measured with, so anyone can rerun it.

    python scripts/local_imports.py [--limit 10] [ROOT ...]

A function-local import is an ``import``/``from ... import`` statement anywhere
inside a ``def``/``async def`` (imports under ``if TYPE_CHECKING:`` at module
level are not inside a function, so they do not count). Its reason is the
``# local import: <reason>`` comment on the statement's first or last line;
without one it is listed as "no reason". Prints each with its reason, then
the total; exit 0 always (it measures, it does not judge: the test does).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path
from typing import NamedTuple

DEFAULT_ROOTS = ("faultload",)
REASON = re.compile(r"#\s*local import:\s*(?P<reason>\S.*?)\s*$")


class LocalImport(NamedTuple):
    path: str
    line: int
    statement: str
    reason: str | None


def _reason(lines: list[str], node: ast.stmt) -> str | None:
    for lineno in (node.lineno, node.end_lineno or node.lineno):
        match = REASON.search(lines[lineno - 1])
        if match:
            return match["reason"]
    return None


def local_imports(path: Path) -> list[LocalImport]:
    """Every import statement inside a function in ``path``, with its reason (or None)."""
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text, filename=str(path))
    seen: set[int] = set()
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in seen:
                    seen.add(id(node))  # a nested function's import is counted once
                    out.append(LocalImport(str(path), node.lineno, ast.unparse(node), _reason(lines, node)))
    return sorted(out, key=lambda i: i.line)


def measure(roots: list[Path]) -> list[LocalImport]:
    """Every function-local import under ``roots``."""
    return [imp for root in roots for path in sorted(root.rglob("*.py")) for imp in local_imports(path)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "roots", nargs="*", default=list(DEFAULT_ROOTS), help="folders to measure (default: %(default)s)"
    )
    parser.add_argument(
        "--limit", type=int, default=10, help="how many are allowed, for the summary line (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    roots = [Path(r) for r in args.roots]
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        print(f"local_imports: no such folder: {missing[0]}", file=sys.stderr)
        return 2
    found = measure(roots)
    for imp in found:
        print(f"{imp.path}:{imp.line}: {imp.statement}  # {imp.reason or 'no reason'}")
    unexplained = sum(1 for imp in found if imp.reason is None)
    print(f"{len(found)} function-local imports (limit {args.limit}); {unexplained} without a reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
