"""The tests mirror the map: every room of docs/architecture.md's rooms table has a test
folder of its own (``tests/<room path>/`` with test modules in it), and no module of the
test tree imports from another one, except shared helpers from ``tests/support``, and
never a private name (fixtures come from ``tests/conftest.py``, which nothing imports).
The markers that say what a test costs are registered, and ``make test-fast`` leaves
each of them out; the run's Hypothesis profile is the one its environment chooses.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path

from hypothesis import settings

from tests.support.files import write_files
from tests.support.profiles import EXAMPLES, chosen_profile

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SUPPORT = "tests.support"
CROSS_ROOM = {
    "cluster": "the standalone cluster gives the local answers, every room at once",
    "reliability": "kill rounds, disk full, fuzzing: the fault matrix of docs/reliability.md",
}
"""Test folders that mirror no room: suites that run many rooms together."""


def room_names(doc: Path) -> list[str]:
    """The rooms (the first column) of the doc's rooms table."""
    rooms = []
    for line in doc.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`[\w.]+`", cells[0]):
            rooms.append(cells[0].strip("`"))
    return rooms


def rooms_without_tests(rooms: list[str], tests: Path) -> list[str]:
    """Rooms whose mirror folder under ``tests`` holds no test module of its own."""
    return [
        f"{room}: no test_*.py in {tests.name}/{room.replace('.', '/')}/"
        for room in rooms
        if not any(tests.joinpath(*room.split(".")).glob("test_*.py"))
    ]


def folders_without_a_room(rooms: list[str], tests: Path, cross_room: set[str]) -> list[str]:
    """Folders under ``tests`` holding test modules that mirror no room and are no
    cross-room suite: a room renamed or removed leaves them behind."""
    mirrors = {tuple(room.split(".")) for room in rooms}
    found = []
    for folder in sorted({p.parent for p in tests.rglob("test_*.py")} - {tests}):
        parts = folder.relative_to(tests).parts
        if parts not in mirrors and parts[0] not in cross_room:
            found.append(f"{tests.name}/{'/'.join(parts)}/ mirrors no room")
    return found


def _module(tests: Path, path: Path) -> str:
    parts = [tests.name, *path.relative_to(tests).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(module: str, path: Path) -> Iterator[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import in ``path``'s text."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{source}" if source else base
            yield source, [alias.name for alias in node.names]


def borrowed_imports(tests: Path) -> list[str]:
    """Imports the layout forbids, one line each: a module of the test tree that takes
    anything from another one outside ``tests/support``, or a private name from any."""
    found = []
    support = f"{tests.name}.support"
    for path in sorted(tests.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        module = _module(tests, path)
        where = path.relative_to(tests.parent)
        for source, names in _imports(module, path):
            if source != tests.name and not source.startswith(f"{tests.name}."):
                continue
            private = [n for n in names if n.startswith("_")]
            if private:
                found.append(f"{where} imports private {', '.join(private)} from {source}")
            shared = source == support or source.startswith(f"{support}.")
            whole_support = source == tests.name and names == ["support"]
            if not (shared or whole_support):
                found.append(
                    f"{where} imports from {source}: shared helpers live in "
                    f"{tests.name}/support/ (fixtures in {tests.name}/conftest.py)"
                )
    return found


ROOMS = room_names(ROOT / "docs" / "architecture.md")


def test_the_rooms_table_is_read() -> None:
    assert {"treestore", "treestore.storage", "loaders.formats", "shell.repl"} <= set(ROOMS)


def test_every_room_has_a_test_folder_of_its_own() -> None:
    assert rooms_without_tests(ROOMS, TESTS) == []


def test_every_test_folder_mirrors_a_room_or_runs_many() -> None:
    assert folders_without_a_room(ROOMS, TESTS, set(CROSS_ROOM)) == []


def test_test_modules_share_helpers_only_through_tests_support() -> None:
    assert borrowed_imports(TESTS) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    return write_files(tmp_path, files) / "tests"


def test_the_layout_checks_find_a_room_without_tests_and_a_stale_folder(tmp_path: Path) -> None:
    tests = _tree(
        tmp_path,
        {
            "tests/pkg/test_a.py": "",
            "tests/pkg/sub/helpers.py": "",  # a helper is not a test of its own
            "tests/old/test_b.py": "",
            "tests/suite/test_c.py": "",
        },
    )
    rooms = ["pkg", "pkg.sub"]
    assert rooms_without_tests(rooms, tests) == ["pkg.sub: no test_*.py in tests/pkg/sub/"]
    assert folders_without_a_room(rooms, tests, {"suite"}) == ["tests/old/ mirrors no room"]


def test_the_import_check_finds_borrowed_and_private_helpers(tmp_path: Path) -> None:
    tests = _tree(
        tmp_path,
        {
            "tests/__init__.py": "",
            "tests/support/__init__.py": "",
            "tests/support/tools.py": "def tool(): ...\ndef _inner(): ...\n",
            "tests/a/__init__.py": "",
            "tests/a/helpers.py": "",
            "tests/a/test_y.py": "def _made(): ...\n",
            "tests/a/test_x.py": (
                "from tests.support.tools import tool\n"
                "import tests.support.tools\n"
                "from tests import support\n"
                "from tests.support.tools import _inner\n"
                "from .test_y import _made\n"
                "def f():\n    import tests.a.helpers\n"
            ),
        },
    )
    assert borrowed_imports(tests) == [
        "tests/a/test_x.py imports private _inner from tests.support.tools",
        "tests/a/test_x.py imports private _made from tests.a.test_y",
        "tests/a/test_x.py imports from tests.a.test_y: shared helpers live in tests/support/"
        " (fixtures in tests/conftest.py)",
        "tests/a/test_x.py imports from tests.a.helpers: shared helpers live in tests/support/"
        " (fixtures in tests/conftest.py)",
    ]


COSTS = {"spark", "cluster", "s3", "browser", "connect", "slow"}


def test_every_cost_marker_is_registered_with_what_it_means() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    described = dict(line.split(": ", 1) for line in config["ini_options"]["markers"])
    assert set(described) == COSTS
    assert all(len(text.split()) >= 3 for text in described.values()), described


def test_the_fast_run_leaves_out_every_costly_test() -> None:
    recipe = (ROOT / "Makefile").read_text().split("\ntest-fast:", 1)[1].split("\n\n", 1)[0]
    words = shlex.split(recipe.split(" pytest ", 1)[1])
    expression = words[words.index("-m") + 1]
    assert re.fullmatch(r"not \((\w+)( or \w+)*\)", expression), expression
    assert set(re.findall(r"\w+", expression)) - {"not", "or"} == COSTS


def test_the_run_uses_the_profile_its_environment_chooses() -> None:
    assert settings.default.max_examples == EXAMPLES[chosen_profile(os.environ)]
