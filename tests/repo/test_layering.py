"""ARCHITECTURE.md's layering rules, checked on the source (a static scan of every import, so a rule broken in
a branch no test runs is still caught)."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "faultload"


def _imports(path: Path, type_only: bool = False) -> list[str]:
    """faultload modules ``path`` imports at run time (imports under ``if TYPE_CHECKING:`` left out unless
    ``type_only``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only and not type_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out += [n for n in names if n.split(".")[0] == "faultload"]
    return out


def _module(path: Path, root: Path = PACKAGE.parent) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def _room(name: str) -> str:
    return ".".join(name.split(".")[:2])


SOURCES = sorted(PACKAGE.rglob("*.py"))


def _package(module: str) -> str:
    """``a.b.__init__`` -> ``a.b``: what an import names."""
    return module.removesuffix(".__init__")


MODULES = frozenset(_package(_module(p)) for p in SOURCES)


def _resolve(name: str, modules: frozenset[str] = MODULES) -> str | None:
    """The module an imported name lives in (``a.b.f`` -> ``a.b``), or None outside ``modules``."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(
    sources: list[Path] = SOURCES, root: Path = PACKAGE.parent, type_only: bool = False
) -> dict[str, set[str]]:
    """module -> the faultload modules importing it runs: what it names, and the packages above them (importing
    ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``); type-only imports left out (they never run) unless
    ``type_only``."""
    modules = frozenset(_package(_module(p, root)) for p in sources)
    graph = {}
    for path in sources:
        module = _package(_module(path, root))
        named = {r for n in _imports(path, type_only) if (r := _resolve(n, modules))}
        parents = {".".join(n.split(".")[:k]) for n in named for k in range(2, n.count(".") + 1)} & modules
        graph[module] = {n for n in named | parents if n != module and not module.startswith(n + ".")}
    return graph


def first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (``[a, b, ..., a]``), or None (graphlib's topological sort finds it)."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


GRAPH = import_graph()
# room -> the only rooms it may import (at run time): plain values and records import plain values,
# and the checker judges records, so a stored trial is judged without running anything
ONLY = {
    "faultload.model": ("faultload.model",),
    "faultload.strategies": ("faultload.model", "faultload.strategies"),
    "faultload.record": ("faultload.model", "faultload.record"),
    "faultload.checker": ("faultload.model", "faultload.record", "faultload.checker"),
    "faultload.host": ("faultload.host",),  # this machine: processes, signals, ports, limits, folders, settings
}
# module -> the only rooms it may import: a stored trial is loaded, shown and judged again without the
# trial runner, the stack, the router, the client or Toxiproxy (faultload check)
OFFLINE = ("faultload.checker", "faultload.model", "faultload.record", "faultload.store", "faultload.version")
# a comparison is judged from stored reports alone (its thresholds from the settings file)
COMPARE_OFFLINE = OFFLINE + ("faultload.compare", "faultload.host.settings")
MODULE_ONLY = {
    "faultload.store.bundle": OFFLINE,
    "faultload.store.check": OFFLINE,
    "faultload.store.report": OFFLINE,
    "faultload.store.html": OFFLINE,
    "faultload.store.html_timeline": OFFLINE,
    "faultload.store.html_trial": OFFLINE,
    "faultload.store.html_matrix": OFFLINE,
    "faultload.store.html_suite": OFFLINE,
    "faultload.compare.judge": COMPARE_OFFLINE,
    "faultload.compare.metrics": COMPARE_OFFLINE,
    "faultload.compare.stats": COMPARE_OFFLINE,
    "faultload.compare.report": COMPARE_OFFLINE,
    "faultload.compare.html": COMPARE_OFFLINE,
}
_FACES = ("faultload.suite", "faultload.cli", "faultload.matrix", "faultload.setup", "faultload.store")
# room -> rooms it must never import (at run time)
FORBIDDEN = {
    "faultload.router": ("faultload.client", "faultload.checker", "faultload.run") + _FACES,
    "faultload.client": ("faultload.checker", "faultload.run", "faultload.router") + _FACES,
    "faultload.faults": ("faultload.checker", "faultload.run", "faultload.router", "faultload.client") + _FACES,
    "faultload.targets": ("faultload.checker", "faultload.run", "faultload.router", "faultload.client") + _FACES,
    "faultload.run": _FACES,
    "faultload.cluster": ("faultload.checker", "faultload.run", "faultload.router", "faultload.faults") + _FACES,
    "faultload.compare": ("faultload.suite", "faultload.cli", "faultload.matrix", "faultload.setup"),
}
# module -> what it must never import, beyond its room's rules
MODULE_FORBIDDEN = {"faultload.run.stack": ("faultload.checker",)}
INSIDE_THE_TARGET = (
    "faultload.targets.skyrl_patches",
    "faultload.targets.skyrl_forwarding",
    "faultload.targets.skyrl_mutants",
    "faultload.targets.skyrl_mutants_time",
    "faultload.targets.skyrl_mutants_size",
    "faultload.targets.skyrl_mutants_cost",
    "faultload.targets.skyrl_dbpool",
    "faultload.targets.skyrl_launch",
    "faultload.targets.skyrl_engine",
    "faultload.targets.tuft_launch",
    "faultload.targets.tuft_patches",
    "faultload.targets.tuft_forwarding",
    "faultload.targets.tuft_fixes",
    "faultload.targets.hatchery_launch",
    "faultload.targets.hatchery_patches",
    "faultload.targets.hatchery_forwarding",
    "faultload.targets.hatchery_fixes",
    "faultload.targets.twinkle_launch",
    "faultload.targets.twinkle_patches",
    "faultload.targets.twinkle_forwarding",
    "faultload.targets.twinkle_fixes",
    "faultload.targets.router_answers",
    "faultload.targets.launch_profile",
    "faultload.targets.launch_logs",
)
# the suite, the matrix that runs it, and the command line whose `matrix` command runs the matrix
USES_THE_SUITE = ("faultload.suite", "faultload.matrix", "faultload.cli", "faultload.__main__")


def _under(name: str, rooms: tuple[str, ...]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in rooms)


def broken_rule(module: str, imports: list[str]) -> str | None:
    """The first of ARCHITECTURE.md's layering rules that ``module`` importing ``imports`` breaks, or None."""
    room = _room(module)
    for name in imports:
        if room in ONLY and _room(name) not in ONLY[room]:
            return f"{module} imports {name}: ARCHITECTURE.md lets {room} import only {', '.join(ONLY[room])}"
        if (
            module in MODULE_ONLY
            and not _under(name, MODULE_ONLY[module])
            and not any(allowed.startswith(name + ".") for allowed in MODULE_ONLY[module])
        ):  # its package
            return f"{module} imports {name}: ARCHITECTURE.md keeps a stored trial's loading offline"
        forbidden = FORBIDDEN.get(room, ()) + MODULE_FORBIDDEN.get(module, ())
        if _under(name, forbidden):
            return f"{module} imports {name}: ARCHITECTURE.md forbids {room} -> {_room(name)}"
        if _under(name, INSIDE_THE_TARGET):
            return f"{module} imports {name}, code that runs inside the target's Python"
        if _under(name, ("faultload.suite",)) and not _under(module, USES_THE_SUITE):
            return f"{module} imports {name}: only the suite and the matrix use the suite"
    return None


def reached(module: str, graph: dict[str, set[str]] = GRAPH) -> dict[str, list[str]]:
    """Every module that importing ``module`` runs, transitively, each with the chain that pulls it in
    (breadth first: the shortest)."""
    chains = {module: [module]}
    todo = deque([module])
    while todo:
        here = todo.popleft()
        for name in sorted(graph.get(here, ())):
            if name not in chains:
                chains[name] = chains[here] + [name]
                todo.append(name)
    del chains[module]
    return chains


def broken_transitively(module: str, graph: dict[str, set[str]] = GRAPH) -> str | None:
    """The first rule ``module`` breaks through what its imports pull in, with the chain, or None."""
    for name, chain in reached(_package(module), graph).items():
        broken = broken_rule(module, [name])
        if broken is not None:
            return f"{broken} (through {' -> '.join(chain)})"
    return None


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: _module(p))
def test_layering(path: Path) -> None:
    """What a module imports, and what those imports import in turn, keeps its room's rules."""
    assert broken_transitively(_module(path)) is None


def test_a_rule_broken_through_a_helper_is_seen() -> None:
    """A Ray actor's module that imports a harmless-looking helper which imports Toxiproxy's client breaks the
    cluster's rule as surely as a direct import."""
    graph = {
        "faultload.cluster.nodes": {"faultload.host.helper"},
        "faultload.host.helper": {"faultload.faults.toxiproxy"},
    }
    broken = broken_transitively("faultload.cluster.nodes", graph)
    assert (
        broken is not None
        and "faultload.cluster.nodes -> faultload.host.helper -> faultload.faults.toxiproxy" in broken
    )
    assert (
        broken_transitively("faultload.cluster.nodes", {"faultload.cluster.nodes": {"faultload.host.helper"}}) is None
    )


@pytest.mark.parametrize(
    "module, name",
    [
        ("faultload.model.shape", "faultload.run.trial"),
        ("faultload.model.trial", "faultload.record.history"),
        ("faultload.strategies.shapes", "faultload.client.raw"),
        ("faultload.record.history", "faultload.run.monitor"),
        ("faultload.checker.results", "faultload.run.trial"),
        ("faultload.checker.results", "faultload.host.processes"),
        ("faultload.host.processes", "faultload.model.shape"),
        ("faultload.cluster.nodes", "faultload.faults.toxiproxy"),
        ("faultload.store.bundle", "faultload.run.trial"),
        ("faultload.store.check", "faultload.faults.schedule"),
        ("faultload.router.app", "faultload.client.raw"),
        ("faultload.client.raw", "faultload.router.app"),
        ("faultload.client.raw", "faultload.suite.state"),
        ("faultload.faults.schedule", "faultload.run.trial"),
        ("faultload.targets.server", "faultload.run.monitor"),
        ("faultload.run.trial", "faultload.suite.runner"),
        ("faultload.run.trial", "faultload.cli.commands"),
        ("faultload.run.stack", "faultload.checker.judge"),
        ("faultload.run.progress", "faultload.suite.properties"),
        ("faultload.store.repro", "faultload.targets.skyrl_patches"),
        ("faultload.compare.judge", "faultload.run.trial"),
        ("faultload.compare.runner", "faultload.cli.commands"),
    ],
)
def test_each_rule_fails_when_broken(module: str, name: str) -> None:
    """Every rule above catches the import that breaks it (the rules are not vacuous after a move)."""
    assert broken_rule(module, [name]) is not None


def test_every_room_a_rule_names_exists() -> None:
    """A rule naming a room or module that no longer exists (renamed, moved) would pass silently: none does."""
    rooms = {_room(_module(p)) for p in SOURCES} | {_module(p) for p in SOURCES}
    named = (
        set(ONLY)
        | {r for rs in ONLY.values() for r in rs}
        | set(MODULE_ONLY)
        | set(OFFLINE)
        | set(FORBIDDEN)
        | {r for rs in FORBIDDEN.values() for r in rs}
        | set(MODULE_FORBIDDEN)
        | set(INSIDE_THE_TARGET)
        | set(USES_THE_SUITE)
    )
    assert named - rooms == set()


def test_the_scan_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The scan itself: a checker module importing the trial runner is seen; one under TYPE_CHECKING is not."""
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\nfrom faultload.run.trial import run_trial\n"
        "if TYPE_CHECKING:\n    from faultload.suite.runner import SuiteRunner\n"
    )
    assert _imports(src) == ["faultload.run.trial", "faultload.run.trial.run_trial"]


def test_plain_values_load_nothing_heavy() -> None:
    """``import faultload.model, faultload.strategies`` (what a property file or a spawned worker needs
    to build a TrialConfig) loads no HTTP stack, process library or Toxiproxy client."""
    code = (
        "import sys, faultload.model.codec, faultload.model.trial, faultload.strategies; "
        "print(' '.join(m for m in ('aiohttp', 'psutil', 'toxiproxy', 'requests', 'httpx', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == []


def test_no_import_cycle() -> None:
    """No module imports, through any chain of run-time imports, itself (type-only imports are not counted)."""
    assert first_cycle(GRAPH) is None


def test_no_import_cycle_counting_type_only_imports() -> None:
    """Not even for a type: two modules that name each other's types are one module's worth of coupling split
    in two (what one needs of the other is stated as a Protocol where it is used)."""
    assert first_cycle(import_graph(type_only=True)) is None


def test_a_cycle_is_seen() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    cycle = first_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}
    assert first_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_counts_the_packages_an_import_runs(tmp_path: Path) -> None:
    pkg = tmp_path / "faultload"
    (pkg / "x").mkdir(parents=True)
    for name in ("__init__", "x/__init__", "x/y"):
        (pkg / f"{name}.py").write_text("")
    (pkg / "z.py").write_text("from faultload.x.y import f\nif TYPE_CHECKING:\n    import faultload.w\n")
    (pkg / "w.py").write_text("import faultload\n")
    graph = import_graph(sorted(pkg.rglob("*.py")), tmp_path)
    assert graph["faultload.z"] == {"faultload.x.y", "faultload.x"}  # not faultload.w: type-only
    assert graph["faultload.w"] == set()  # a module's own packages ran before it


# The edges that may read the process environment (ARCHITECTURE.md): module -> the functions in it that do
# ("*": the whole module is one: the target launcher and its engine stub run in the server's own process,
# handed their settings by the launching parent through its child's environment).
ENVIRONMENT_EDGES = {
    "faultload.cli.main": {"main"},
    "faultload.suite.plugin": {"pytest_configure", "pytest_cmdline_main"},  # the latter: the lanes' workspace
    "faultload.client.workers": {"_worker_main"},
    "faultload.host.processes": {"child_environment"},  # what a child inherits, minus what it must not
    "faultload.targets.skyrl_launch": {"*"},
    "faultload.targets.skyrl_engine": {"*"},
    # twinkle's launcher hands its launch spec's path to the Ray workers it starts through their environment
    "faultload.targets.twinkle_launch": {"*"},
    "faultload.targets.twinkle_patches": {"*"},
}


def environment_reads(path: Path) -> list[str]:
    """``function`` (or ``<module>``) for each read or write of ``os.environ`` / ``os.getenv`` in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            where = node.name
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("environ", "getenv", "putenv", "unsetenv")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append(where)
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(tree, "<module>")
    return found


def test_the_environment_is_read_only_at_the_edges() -> None:
    outside = [
        f"{_module(p)}:{where}"
        for p in SOURCES
        for where in environment_reads(p)
        if not ENVIRONMENT_EDGES.get(_package(_module(p)), set()) & {where, "*"}
    ]
    assert outside == []


def test_an_environment_read_below_the_edges_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "helper.py"
    path.write_text("import os\n\ndef where():\n    return os.environ.get('HOME')\n\nX = os.getenv('Y')\n")
    assert environment_reads(path) == ["where", "<module>"]
