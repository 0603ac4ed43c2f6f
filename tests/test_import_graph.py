"""The package import graph (issue 15): no cycles, no edge from a lower layer to a higher one.

Every ``import`` in ``src/amcp`` counts — at module level, inside functions (lazy) and under
``TYPE_CHECKING`` (type-only): a lazy or type-only import is still a dependency a reader of
the lower layer has to know about. The layers are ``LAYERS`` below (docs/architecture.md has
the picture); a package may import its own layer and the ones under it.

``KNOWN`` lists the edges that still break the rule, each to be removed as it is fixed. The
test fails on any edge or cycle not in it, and on an entry in it that no longer exists (so
the list only shrinks).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# Bottom to top. A name is a top-level package or module of amcp (memory.py → "memory").
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "clock", "heap", "paths", "subkeys", "testing"),
    ("amf", "wire", "keyring"),
    ("session",),
    ("store",),
    ("refs",),
    ("retrieval",),
    ("firewall",),
    ("memory_writes",),
    ("memory_review",),
    ("ports",),
    ("evolution",),
    ("amql", "cse", "ndjson"),
    ("memory",),
    ("sync", "brain"),
    ("node",),
    ("agent", "conformance"),
    ("portability",),
    ("web",),
    ("ui",),
    ("api",),
    ("cli", "smoke"),
)
RANK = {name: n for n, names in enumerate(LAYERS) for name in names}

# (importer, imported) package edges still against the rule; see the module docstring.
KNOWN: frozenset[tuple[str, str]] = frozenset()
# Module cycles still present (each the sorted modules of one cycle).
KNOWN_MODULE_CYCLES: frozenset[tuple[str, ...]] = frozenset()


def _module_names() -> dict[str, Path]:
    names = {}
    for path in (SRC / "amcp").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _imports(module: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """Every amcp module ``module`` imports, wherever the import statement sits."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for name in targets:
            while name not in known and "." in name:
                name = name.rsplit(".", 1)[0]  # noqa: PLW2901 - the module a name lives in
            if name in known and name != module:
                yield name


def module_graph() -> dict[str, set[str]]:
    known = _module_names()
    return {m: set(_imports(m, p, known)) for m, p in known.items()}


def _group(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(importer package, imported package) → the module edges behind it."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, targets in graph.items():
        for target in targets:
            a, b = _group(module), _group(target)
            if a != b and "amcp" not in (a, b):
                edges[(a, b)].append(f"{module} -> {target}")
    return edges


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
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
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(tuple(sorted(members)))
    return found


def test_every_package_has_a_layer() -> None:
    packages = {_group(m) for m in _module_names()} - {"amcp"}
    assert packages <= set(RANK), f"give these a layer in LAYERS: {packages - set(RANK)}"


def test_no_edge_points_upwards_or_closes_a_cycle() -> None:
    edges = package_edges(module_graph())
    up = {e for e in edges if RANK[e[1]] > RANK[e[0]]}
    pkg_graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        pkg_graph[a].add(b)
    in_cycle = {(a, b) for comp in cycles(pkg_graph) for a, b in edges
                if a in comp and b in comp and RANK[b] >= RANK[a]}
    bad = (up | in_cycle) - KNOWN
    assert not bad, "new upward or cyclic package imports:\n" + "\n".join(
        f"{a} -> {b}: {edges[(a, b)][:3]}" for a, b in sorted(bad))
    stale = KNOWN - (up | in_cycle)
    assert not stale, f"fixed, so remove from KNOWN: {sorted(stale)}"


def test_no_module_import_cycles() -> None:
    found = set(cycles(module_graph()))
    new = found - KNOWN_MODULE_CYCLES
    assert not new, "module import cycles:\n" + "\n".join(" ".join(c) for c in sorted(new))
    stale = KNOWN_MODULE_CYCLES - found
    assert not stale, f"fixed, so remove from KNOWN_MODULE_CYCLES: {sorted(stale)}"
