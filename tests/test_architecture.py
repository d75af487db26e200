"""The house: floors one way, no import circles, files with one job, one home per class name.

The import graph is read from the code itself (ast: every import, also those inside functions, which are
imports all the same) over the packages, bottom to top: common <- kernels <- ceilings <- analysis <- scripts
(docs/architecture.md). A module may import its own package or one below it, never one above."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLOORS = ("common", "kernels", "ceilings", "analysis", "scripts")  # bottom first
MAX_LINES = 800


def _modules() -> dict[str, Path]:
    found = {}
    for package in FLOORS:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The project modules an import statement names (`from .x import y` may name module x.y or x's y)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".")
            if MODULES[module].name != "__init__.py":
                base.pop()
            base = base[:len(base) - node.level + 1]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = [prefix, *(f"{prefix}.{alias.name}" for alias in node.names)]
    out = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def _graph() -> dict[str, set[str]]:
    graph = defaultdict(set)
    for module, path in MODULES.items():
        graph[module]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module].update(_imported(module, node))
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, circles = {}, {}, set(), [], []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_the_graph_reader_finds_a_circle_and_an_arrow_up():
    """The checks below are not vacuous: a made-up graph with a circle and an upward arrow is caught."""
    graph = {"analysis.a": {"analysis.b"}, "analysis.b": {"analysis.a"}, "kernels.k": {"ceilings.c"},
             "ceilings.c": set()}
    assert _circles(graph) == [["analysis.a", "analysis.b"]]
    assert _arrows_up(graph) == [("kernels.k", "ceilings.c")]
    assert "analysis.ncu" in MODULES and "kernels.sass" in MODULES  # the real graph is read


def _arrows_up(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    floor = {package: i for i, package in enumerate(FLOORS)}
    return sorted((m, d) for m, deps in graph.items() for d in deps
                  if floor[d.split(".")[0]] > floor[m.split(".")[0]])


def test_no_import_circles():
    assert _circles(_graph()) == []


def test_packages_import_only_their_own_floor_or_below():
    assert _arrows_up(_graph()) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_over_800_lines(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module}: {lines} lines; split it by job"


def test_one_class_name_one_idea():
    """No class name is defined in two modules of the packages (two `Op`s or `Sweep`s are two ideas with one
    name, or one idea with two homes)."""
    homes = defaultdict(list)
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                homes[node.name].append(module)
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}
