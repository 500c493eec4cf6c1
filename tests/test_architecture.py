"""The house reads one way: the import graph of allocator/ and dra_web/, built from the source
with ``ast`` (every import counts: function-local and TYPE_CHECKING ones too).

- no import cycle in either tree;
- the functional core stays pure: allocator/ imports neither Django, Celery, the Kubernetes
  client, the network nor dra_web;
- the DRA features sit beside the core checks, below the search: no feature module reaches
  the DFS;
- each package of allocator/ is one layer: read as one room, the packages and modules form no
  cycle either.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TREES = ("allocator", "dra_web")
# What the functional core must not import: the shell's packages and the network. The CEL URL
# library's percent-encoding (``urllib.parse``) is string handling and stays allowed.
IMPURE = (
    "dra_web",
    "django",
    "rest_framework",
    "celery",
    "kombu",
    "kubernetes",
    "requests",
    "httpx",
    "urllib.request",
    "urllib.error",
    "urllib.response",
    "urllib.robotparser",
    "http",
    "socket",
    "ssl",
)


def _impure(name: str) -> bool:
    return name == "urllib" or any(name == p or name.startswith(p + ".") for p in IMPURE)


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    out = {}
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            if "migrations" not in path.parts:
                out[_module_of(path)] = path
    return out


SOURCES = _sources()


def _imported(module: str, path: Path) -> Iterator[str]:
    """Every name an import of ``module`` names, absolute: ``a.b`` for ``import a.b``,
    ``a.b`` and ``a.b.c`` for ``from a.b import c`` (c may be a module or a name in a.b)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = parts[: len(parts) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _own(name: str) -> str | None:
    """The project module ``name`` is, or is in (the longest known prefix)."""
    while name and name not in SOURCES:
        name = name.rpartition(".")[0]
    return name or None


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(edges between the project's modules, every name each module imports)."""
    edges: dict[str, set[str]] = {m: set() for m in SOURCES}
    names: dict[str, set[str]] = {m: set() for m in SOURCES}
    for module, path in SOURCES.items():
        for name in _imported(module, path):
            names[module].add(name)
            target = _own(name)
            # A package's face (__init__) importing its own children is not a dependency.
            face = path.name == "__init__.py" and target is not None
            if target and target != module and not (face and target.startswith(module + ".")):
                edges[module].add(target)
    return edges, names


EDGES, NAMES = _graph()


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _reachable(start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in EDGES[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def test_the_graph_counts_function_local_and_type_checking_imports():
    # simulate() imports the scheduling setup inside the function; the CLI its loader too.
    assert "allocator.scheduling.setup" in EDGES["allocator.simulation"]
    assert "allocator.snapshot" in EDGES["allocator.cli"]
    # And a cycle made of such imports is found.
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("tree", TREES)
def test_no_import_cycle(tree):
    edges = {m: {w for w in ws if w.split(".")[0] == tree} for m, ws in EDGES.items()}
    edges = {m: ws for m, ws in edges.items() if m.split(".")[0] == tree}
    assert _cycles(edges) == []


def _room(module: str) -> str:
    """The module, or the package of allocator/ it is in (``allocator.scheduling``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else module


def test_each_package_of_the_allocator_is_one_layer():
    # A package (scheduling/, features/, explanation/, suggestions/, snapshot/, cel/ ...) read
    # as one room: nothing it imports imports it back, so the funnel the DFS fills, the gates
    # the checks read and the names the loader checks live below what reads them.
    rooms: dict[str, set[str]] = {}
    for module, targets in EDGES.items():
        if module.split(".")[0] != "allocator":
            continue
        rooms.setdefault(_room(module), set()).update(
            _room(t)
            for t in targets
            if t.split(".")[0] == "allocator" and _room(t) != _room(module)
        )
    for room in {w for ws in rooms.values() for w in ws}:
        rooms.setdefault(room, set())
    assert _cycles(rooms) == []
    assert _room("allocator.suggestions.core") == "allocator.suggestions"
    assert _room("allocator.funnel") == "allocator.funnel"


def test_the_allocator_imports_nothing_of_the_shell_or_the_network():
    impure = {
        module: sorted(n for n in NAMES[module] if _impure(n))
        for module in SOURCES
        if module.split(".")[0] == "allocator"
    }
    assert {m: found for m, found in impure.items() if found} == {}
    # The rule itself: what the shell imports is caught, the core's own modules are not.
    assert _impure("django.db") and _impure("urllib.request") and _impure("dra_web.runs")
    assert not _impure("urllib.parse") and not _impure("allocator.requests")


def test_no_feature_module_reaches_the_dfs():
    features = [m for m in SOURCES if m.startswith("allocator.features.")]
    assert len(features) >= 10  # the DRA features, one module each
    reaching = sorted(m for m in features if "allocator.dfs" in _reachable(m))
    assert reaching == []


def test_the_dfs_imports_no_feature_and_no_pipeline():
    imported = EDGES["allocator.dfs"]
    assert not any(m.startswith("allocator.features.") for m in imported)
    assert "allocator.pipeline" not in _reachable("allocator.dfs")
