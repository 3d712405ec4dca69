"""The architecture holds: rooms import only what docs/architecture.md allows, and no cycles.

The rooms table of ``docs/architecture.md`` is the rule: each row names a room (a
package), and the rooms or modules it may import. Every import counts, including
imports inside functions and under ``TYPE_CHECKING`` (see :mod:`tests.support.import_graph`).
The map stays true both ways: every import is allowed, every allowance is used, no two
rooms import each other (directly or through others), and each package's docstring
says in its "May import:" sentence exactly what its row says.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from tests.support.files import write_files
from tests.support.import_graph import cycles, import_graph, module_name, room_of

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("treestore", "query", "loaders", "shell")
# The imports against the direction (the facade's ``open().query`` and ``connect()``).
FACADE_EXCEPTIONS = {
    ("treestore", "query.driver.runner"),
    ("treestore", "query.remote.client"),
    ("treestore", "query.driver.spark_source"),
}
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
            if (module, target) in FACADE_EXCEPTIONS:
                continue
            found.append(f"{module} -> {target} (room {room} may import {sorted(allowed)})")
    return found


Import = tuple[str, str]
"""One import, as ``(importer, imported)`` module names."""


def room_edges(
    graph: dict[str, set[str]], rooms: dict[str, set[str]]
) -> dict[str, dict[str, set[Import]]]:
    """Room -> each other room its modules import -> the imports that do it.

    The facade's named exceptions are left out: they are the table's only imports
    against the direction, and they are allowed by name.
    """
    edges: dict[str, dict[str, set[Import]]] = {}
    for module, targets in graph.items():
        room = room_of(module, rooms)
        for target in targets:
            target_room = room_of(target, rooms)
            if room is None or target_room is None or target_room == room:
                continue
            if (module, target) not in FACADE_EXCEPTIONS:
                edges.setdefault(room, {}).setdefault(target_room, set()).add((module, target))
    return edges


def unused_allowances(graph: dict[str, set[str]], rooms: dict[str, set[str]]) -> list[str]:
    """Allowances of the rooms table that no import uses: a room no module of the row's
    room imports, or a listed module that none of them imports (or imports below)."""
    edges = room_edges(graph, rooms)
    found = []
    for room, allowed in sorted(rooms.items()):
        imports = edges.get(room, {})
        imported = {target for pairs in imports.values() for _, target in pairs}
        for allowance in sorted(allowed):
            if allowance in rooms:
                used = allowance in imports
            else:
                used = any(t == allowance or t.startswith(allowance + ".") for t in imported)
            if not used:
                found.append(f"room {room} may import {allowance}, but nothing there does")
    return found


def room_cycles(graph: dict[str, set[str]], rooms: dict[str, set[str]]) -> list[str]:
    """Groups of rooms that import each other, directly or through other rooms, each
    with the imports that tie it (modules may form no cycle and their rooms still do)."""
    edges = room_edges(graph, rooms)
    found = []
    for group in cycles({room: set(targets) for room, targets in edges.items()}):
        ties = sorted(pair for a in group for b in group for pair in edges[a].get(b, ()))
        found.append(f"{' <-> '.join(group)}: {'; '.join(f'{a} -> {b}' for a, b in ties)}")
    return found


MAY_IMPORT = re.compile(r"May import:(.*?)(?:\.\s|\.?\Z)", re.DOTALL)
"""A package docstring's "May import:" sentence (it ends at a period before a space
or at the end; the periods inside dotted names do not end it)."""


def docstring_drift(root: Path, packages: tuple[str, ...], rooms: dict[str, set[str]]) -> list[str]:
    """Packages whose docstring's "May import:" sentence does not name (in double
    backticks) exactly the rooms and modules of its row in the rooms table.

    Together with the direction check and the unused-allowance check (the row is
    exactly what the room's modules import), a true docstring is true of the imports.
    """
    found = []
    for name in packages:
        for init in sorted((root / name).rglob("__init__.py")):
            where = init.relative_to(root)
            room = module_name(root, init)
            sentence = MAY_IMPORT.search(ast.get_docstring(ast.parse(init.read_text())) or "")
            if sentence is None:
                found.append(f'{where}: no "May import:" sentence')
                continue
            said = set(re.findall(r"``([\w.]+)``", sentence.group(1)))
            row = rooms.get(room, set())
            if said != row:
                found.append(f"{where} says it may import {sorted(said)}; its row: {sorted(row)}")
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


def test_every_allowance_of_the_rooms_table_is_used() -> None:
    assert unused_allowances(GRAPH, ROOMS) == []


def test_no_two_rooms_import_each_other() -> None:
    assert room_cycles(GRAPH, ROOMS) == []


def test_every_package_docstring_says_what_its_row_says() -> None:
    assert docstring_drift(ROOT, PACKAGES, ROOMS) == []


def test_nothing_imports_the_command_line() -> None:
    """Only the entry point loads the command line, and nothing imports the entry point
    (``python -m treestore`` and the ``treestore`` command run it)."""
    assert [m for m, targets in GRAPH.items() if "shell.cli" in targets] == ["shell.entry"]
    assert [m for m, targets in GRAPH.items() if "shell.entry" in targets] == []


def test_the_cycle_check_finds_a_cycle_through_a_lazy_import(tmp_path: Path) -> None:
    root = write_files(
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
    root = write_files(
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
    root = write_files(
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


def test_the_allowance_check_finds_an_allowance_no_import_uses(tmp_path: Path) -> None:
    root = write_files(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/a.py": "",
            "low/b.py": "",
            "mid/__init__.py": "",
            "mid/c.py": "",
            "high/__init__.py": "",
            "high/d.py": "def f():\n    from low import a\n",
        },
    )
    rooms = {"low": set(), "mid": set(), "high": {"low.a", "low.b", "mid"}}
    graph = import_graph(root, ["low", "mid", "high"])
    assert violations(graph, rooms) == []
    assert unused_allowances(graph, rooms) == [
        "room high may import low.b, but nothing there does",
        "room high may import mid, but nothing there does",
    ]


def test_the_room_check_finds_rooms_that_import_each_other(tmp_path: Path) -> None:
    """``app.cmd -> app.sub.loop -> app.fmt`` is no module cycle, but the rooms ``app``
    and ``app.sub`` import each other; ``app.sub`` importing ``low`` is one way."""
    root = write_files(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/x.py": "",
            "app/__init__.py": "",
            "app/cmd.py": "from app.sub.loop import run\n",
            "app/fmt.py": "",
            "app/sub/__init__.py": "",
            "app/sub/loop.py": "from app import fmt\nfrom low.x import y\n",
        },
    )
    rooms = {"low": set(), "app": {"app.sub"}, "app.sub": {"app", "low"}}
    graph = import_graph(root, ["low", "app"])
    assert cycles(graph) == []
    assert violations(graph, rooms) == []
    assert room_cycles(graph, rooms) == [
        "app <-> app.sub: app.cmd -> app.sub.loop; app.sub.loop -> app.fmt"
    ]


def test_the_docstring_check_finds_a_may_import_that_disagrees(tmp_path: Path) -> None:
    """Only the "May import:" sentence counts: ``low``'s next sentence names ``high``."""
    root = write_files(
        tmp_path,
        {
            "low/__init__.py": '"""Low.\n\nMay import: nothing. Never ``high``."""\n',
            "mid/__init__.py": '"""Mid.\n\nMay import: ``low``, ``high``."""\n',
            "high/__init__.py": '"""High.\n\nMay import: ``low.a`` and\n``mid``."""\n',
            "high/sub/__init__.py": '"""Below high, saying nothing of its imports."""\n',
        },
    )
    rooms = {"low": set(), "mid": {"low"}, "high": {"low.a", "mid"}, "high.sub": {"high"}}
    assert docstring_drift(root, ("low", "mid", "high"), rooms) == [
        "mid/__init__.py says it may import ['high', 'low']; its row: ['low']",
        'high/sub/__init__.py: no "May import:" sentence',
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
