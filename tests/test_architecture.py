"""The shape of the package: no import cycle anywhere, and modules small enough to read in one sitting.

The layers themselves (what may import what) are import-linter's contracts in ``pyproject.toml``,
which CI runs; these tests add what a layers contract cannot see: a cycle inside one layer or one
package, and a module that has grown past what its docstring can still describe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import grimp

PACKAGE = Path(__file__).resolve().parent.parent / "traceq"

MAX_LINES: Final = 480
"""A module a newcomer reads in one sitting: about 450 lines (house style: "a few hundred"); the
bound leaves the interval engine (``intervals.py``, one algebra and its calling convention, 464
lines) whole."""

DATA_TABLES: Final[frozenset[str]] = frozenset()
"""Modules that are mostly data (copied DDL, peak tables) and may be longer; none today."""


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of two or more modules
    (Tarjan's algorithm, iterative, so a deep graph cannot overflow the stack)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
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
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_anywhere_in_traceq() -> None:
    """Lazy imports inside functions count too: grimp reads every import statement."""
    imports = grimp.build_graph("traceq", include_external_packages=False)
    graph = {m: set(imports.find_modules_directly_imported_by(m)) for m in imports.modules}
    assert strongly_connected(graph) == []


def test_no_module_is_longer_than_a_sitting() -> None:
    sizes = {
        str(p.relative_to(PACKAGE.parent)): len(p.read_text().splitlines())
        for p in sorted(PACKAGE.rglob("*.py"))
        if str(p.relative_to(PACKAGE.parent)) not in DATA_TABLES
    }
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
