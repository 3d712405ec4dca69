"""The architecture holds: rooms import only what docs/architecture.md allows, and no cycles.

The rooms table of ``docs/architecture.md`` is the rule: each row names a room (a
package), and the rooms or modules it may import. Every import counts, including
imports inside functions and under ``TYPE_CHECKING`` (see :mod:`tests.import_graph`).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from tests.import_graph import cycles, import_graph, room_of

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("treestore", "query", "loaders", "shell")
# The one import against the direction (the facade's ``open().query``), in one place.
FACADE_EXCEPTION = ("treestore", "query.driver.runner")
MAX_MODULES_PER_FOLDER = 13


def read_rooms(doc: Path) -> dict[str, set[str]]:
    """Room -> the rooms and modules it may import, from the doc's rooms table."""
    rooms: dict[str, set[str]] = {}
    for line in doc.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not re.fullmatch(r"`[\w.]+`", cells[0]):
            continue
        rooms[cells[0].strip("`")] = set(re.findall(r"`([\w.]+)`", cells[2]))
    return rooms


def violations(graph: dict[str, set[str]], rooms: dict[str, set[str]]) -> list[str]:
    """Imports the rooms table does not allow, as ``importer -> imported`` lines."""
    found = []
    for module, targets in sorted(graph.items()):
        room = room_of(module, rooms)
        if room is None:
            found.append(f"{module} lives in no room of the table")
            continue
        for target in sorted(targets):
            target_room = room_of(target, rooms)
            allowed = rooms[room]
            if target_room == room or target_room in allowed:
                continue
            if any(target == m or target.startswith(m + ".") for m in allowed if m not in rooms):
                continue
            if (module, target) == FACADE_EXCEPTION:
                continue
            found.append(f"{module} -> {target} (room {room} may import {sorted(allowed)})")
    return found


ROOMS = read_rooms(ROOT / "docs" / "architecture.md")
GRAPH = import_graph(ROOT, PACKAGES)


def test_the_rooms_table_names_every_package() -> None:
    packages = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for name in PACKAGES
        for p in (ROOT / name).rglob("__init__.py")
    }
    assert packages == set(ROOMS)


def test_no_module_cycles_lazy_imports_included() -> None:
    assert cycles(GRAPH) == []


def test_every_import_follows_the_rooms_table() -> None:
    assert violations(GRAPH, ROOMS) == []


def test_nothing_imports_the_command_line() -> None:
    """Only the entry point loads the command line, and nothing imports the entry point
    (``python -m treestore`` and the ``treestore`` command run it)."""
    assert [m for m, targets in GRAPH.items() if "shell.cli" in targets] == ["shell.entry"]
    assert [m for m, targets in GRAPH.items() if "shell.entry" in targets] == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_cycle_check_finds_a_cycle_through_a_lazy_import(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import f\n",
            "pkg/b.py": "def f():\n    from pkg import c\n",
            "pkg/c.py": "import pkg.a\n",
            "pkg/d.py": "from pkg.a import f\n",
        },
    )
    assert cycles(import_graph(root, ["pkg"])) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_the_cycle_check_finds_relative_and_type_checking_imports(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/x.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..y import T\n"
            ),
            "pkg/y.py": "from .sub import x\n",
        },
    )
    assert cycles(import_graph(root, ["pkg"])) == [["pkg.sub.x", "pkg.y"]]


def test_the_direction_check_finds_an_import_against_the_table(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/a.py": "def f():\n    import high.b\n",
            "high/__init__.py": "",
            "high/b.py": "from low.a import f\n",
        },
    )
    rooms = {"low": set(), "high": {"low"}}
    assert violations(import_graph(root, ["low", "high"]), rooms) == [
        "low.a -> high.b (room low may import [])"
    ]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_print_in_the_library(package: str) -> None:
    if package == "shell":
        return  # the shell is where output goes
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            assert not (isinstance(node, ast.Name) and node.id == "print"), (
                f"{path.relative_to(ROOT)}:{node.lineno} uses print: emit an event instead"
            )


def test_every_package_says_what_lives_there_and_what_it_may_import() -> None:
    for name in PACKAGES:
        for init in (ROOT / name).rglob("__init__.py"):
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            assert doc, f"{init.relative_to(ROOT)} has no docstring"
            assert "may import" in doc.lower(), f"{init.relative_to(ROOT)}: what may it import?"


def test_no_folder_is_crowded() -> None:
    for name in PACKAGES:
        for folder in [ROOT / name, *(p for p in (ROOT / name).rglob("*") if p.is_dir())]:
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            assert len(modules) <= MAX_MODULES_PER_FOLDER, f"{folder}: {len(modules)} modules"


@pytest.mark.parametrize(
    "package",
    ["treestore", "query", "query.ops", "loaders", "loaders.follow", "loaders.sweep", "shell"],
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
    public -= {"annotations", "TYPE_CHECKING", "os", "Iterable", "Any"}
    assert public <= set(module.__all__) | {"open"}, public - set(module.__all__)
