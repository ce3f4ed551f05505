"""No import circle among the modules of the installed packages (``scholar_es``, ``indexer``,
``querybuilder``), imports inside functions included.

Every module is parsed with :mod:`ast`; every ``import``/``from ... import`` node counts, wherever
it stands (module level, inside a function, under ``if TYPE_CHECKING:``). ``from pkg import name``
is an edge to ``pkg.name`` when that is a module, else to ``pkg``; a relative import is resolved
against the importing module's package. Importing a submodule also runs its packages'
``__init__`` modules, but those hold re-exports at most and ``scholar_es/__init__.py``'s are
lazy (PEP 562), so only the named module counts. Imports of ``TYPE_CHECKING`` blocks are not left
out: they name the same dependency a run-time import would, and a type-only circle is still a
circle to a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("scholar_es", "indexer", "querybuilder")


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the three packages that the module ``name`` imports (every import node)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in modules:  # an attribute of a module: the module
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in modules else base)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (``[a, b, ..., a]``), or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_function_level_and_submodule_imports():
    graph = import_graph()
    assert "querybuilder.plan" in graph and "scholar_es.engine.rest.transport" in graph
    assert "scholar_es.errors" in graph["querybuilder.plan"]
    # scholar_es.client imports the engine's transport inside connect()
    assert "scholar_es.engine.rest.transport" in graph["scholar_es.client"]


def test_find_cycle_reports_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])
