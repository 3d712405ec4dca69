"""The layering rule (shell -> query -> treestore; loaders -> treestore + query) and __all__."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "treestore": {"query", "loaders", "shell"},
    "query": {"loaders", "shell"},
    "loaders": {"shell"},
    "shell": set(),
}
# The public facade and the script entry compose the layers (see treestore/__init__.py).
COMPOSITION_ROOTS = {ROOT / "treestore" / "__init__.py", ROOT / "treestore" / "__main__.py"}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_module_imports_an_upper_layer(package: str) -> None:
    for path in (ROOT / package).rglob("*.py"):
        if path in COMPOSITION_ROOTS:
            continue
        bad = _imports(path) & FORBIDDEN[package]
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize(
    "package", ["treestore", "query", "query.ops", "loaders", "loaders.sweep", "shell"]
)
def test_dunder_all_lists_real_public_names(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert hasattr(module, name), f"{package}.__all__ names missing {name}"
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and not isinstance(v, type(module))
    }
    public -= {"annotations", "TYPE_CHECKING", "os", "Iterable"}
    assert public <= set(module.__all__) | {"open"}, public - set(module.__all__)
