"""The project's import graph, read from the source with ``ast``: every import, lazy ones too.

An edge ``a -> b`` means module ``a`` imports module ``b`` somewhere in its text: at the
top, inside a function, or under ``if TYPE_CHECKING:``. ``from pkg import name`` is an
edge to ``pkg.name`` when that is a module, else to ``pkg``. Importing ``a.b.c`` also
runs ``a/__init__`` and ``a/b/__init__``, but those implicit parent imports are not
edges: a package that re-exports its modules would otherwise always be a cycle.
``__main__`` modules are scripts (nothing imports them) and are left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

__all__ = ["cycles", "import_graph", "module_name", "room_of"]


def module_name(root: Path, path: Path) -> str:
    """The dotted module name of ``path`` (a ``.py`` file under ``root``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if path.name != "__main__.py" and "__pycache__" not in path.parts:
                found[module_name(root, path)] = path
    return found


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _targets(module: str, path: Path, known: set[str]) -> set[str]:
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, path, node)
            for alias in node.names:
                if f"{source}.{alias.name}" in known:
                    targets.add(f"{source}.{alias.name}")
                elif source in known:
                    targets.add(source)
    targets.discard(module)
    return targets


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, set[str]]:
    """Module -> the project modules it imports, for every module of ``packages`` under ``root``."""
    modules = _modules(root, packages)
    known = set(modules)
    return {name: _targets(name, path, known) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other, directly or not (sorted names).

    Tarjan's strongly connected components, iterative so deep graphs do not recurse.

    >>> cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    [['a', 'b', 'c']]
    >>> cycles({"a": {"b"}, "b": set()})
    []
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return sorted(found)


def room_of(module: str, rooms: Iterable[str]) -> str | None:
    """The room (a package listed in ``rooms``) a module lives in: the longest that holds it.

    >>> room_of("treestore.storage.pages", ["treestore", "treestore.storage"])
    'treestore.storage'
    >>> room_of("treestore.errors", ["treestore", "treestore.storage"])
    'treestore'
    """
    holding = [r for r in rooms if module == r or module.startswith(r + ".")]
    return max(holding, key=len) if holding else None
