"""Module and function sizes of the harness: the rule "no module over 400 lines, no function over
60 lines" is measured with, so anyone can rerun it.

    python scripts/module_sizes.py [--modules 400] [--functions 60] [--markdown] [ROOT ...]

Lines are the file's lines; a function's lines run from its ``def`` to its
last line, minus its docstring (comments and blank lines count: they are
what a reader reads). Prints the modules and functions over the limits and
the totals; exit 0 always (it measures, it does not judge). The standard
library's ``ast`` does the parsing: nothing here needs a third-party tool.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

DEFAULT_ROOTS = ("faultload",)


def _docstring_lines(node: ast.AST) -> int:
    body = getattr(node, "body", None)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(getattr(body[0], "value", None), ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[0].end_lineno - body[0].lineno + 1
    return 0


def function_sizes(path: Path) -> list[tuple[str, int]]:
    """(qualified name, lines without the docstring) of every function and method in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                out.append((name, child.end_lineno - child.lineno + 1 - _docstring_lines(child)))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return out


def measure(roots: list[Path]) -> tuple[list[tuple[str, int]], list[tuple[str, str, int]]]:
    """Every module's line count and every function's size under ``roots``."""
    modules, functions = [], []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            modules.append((str(path), len(path.read_text().splitlines())))
            functions += [(str(path), name, size) for name, size in function_sizes(path)]
    return modules, functions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "roots", nargs="*", default=list(DEFAULT_ROOTS), help="folders to measure (default: %(default)s)"
    )
    parser.add_argument("--modules", type=int, default=400, help="module line limit (default: %(default)s)")
    parser.add_argument("--functions", type=int, default=60, help="function line limit (default: %(default)s)")
    args = parser.parse_args(argv)
    roots = [Path(r) for r in args.roots]
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        print(f"module_sizes: no such folder: {missing[0]}", file=sys.stderr)
        return 2
    modules, functions = measure(roots)
    big_modules = sorted((m for m in modules if m[1] > args.modules), key=lambda m: -m[1])
    long_functions = sorted((f for f in functions if f[2] > args.functions), key=lambda f: -f[2])
    print(f"{len(modules)} modules, {sum(n for _, n in modules)} lines; {len(functions)} functions")
    print(f"modules over {args.modules} lines: {len(big_modules)}")
    for path, n in big_modules:
        print(f"  {n:5d}  {path}")
    print(f"functions over {args.functions} lines (docstrings excluded): {len(long_functions)}")
    for path, name, n in long_functions:
        print(f"  {n:5d}  {path}:{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
