"""The store's layout: its names are the on-disk format, and they live in one module.

The library builds every path in a store from :mod:`treestore.store.layout`; a scan of
its source fails when a store-level name is written as a literal path part anywhere
else (a name passed to a page store's method or to ``/``, a constant naming it, or a
string that starts a path with it).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.tree import ShardTree
from treestore.store import layout
from treestore.store.lock import store_lock
from treestore.store.versions import StoreWriter, open_version

ROOT = Path(__file__).resolve().parents[3]
LIBRARY = ("treestore", "loaders", "query", "shell")
LAYOUT_MODULE = Path("treestore/store/layout.py")

NAMES = frozenset(
    (
        *layout.TOP_LEVEL,
        *(n.rsplit("/", 1)[1] for n in (layout.DEDUP_INDEX, layout.STREAM_CHECKPOINT)),
    )
)
"""The names a scan looks for: the store's top level, and names inside its folders that
no other file of the project shares."""
_ALTERNATIVES = "|".join(re.escape(n) for n in sorted(NAMES))
PATH_TEXT = re.compile(rf"(?:^|/)(?:{_ALTERNATIVES})/|/(?:{_ALTERNATIVES})\b")
"""Text that builds a path with a name: ``trees/...`` or ``.../CURRENT``."""
PATH_CALLS = frozenset(
    {
        "create",
        "delete",
        "exists",
        "join",
        "list",
        "local_path",
        "modified",
        "Path",
        "read",
        "read_range",
        "read_table",
        "size",
        "write",
        "write_table",
        "writer",
    }
)
"""Calls whose string arguments are names in a store (page store methods) or paths."""


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of string constants that stand alone as statements (docstrings)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def layout_literals(source: str) -> Iterator[tuple[int, str]]:
    """Where ``source`` writes a store-level name as a literal path part: (line, text)."""
    tree = ast.parse(source)
    skipped = _docstrings(tree)
    named: set[int] = set()  # constants in a place that makes them a path part
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) in PATH_CALLS:
            named |= {id(arg) for arg in [*node.args, *(k.value for k in node.keywords)]}
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            named |= {id(node.left), id(node.right)}
        elif isinstance(node, ast.Module | ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value:
                    named.add(id(statement.value))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in skipped:
            continue
        if (id(node) in named and node.value in NAMES) or PATH_TEXT.search(node.value):
            yield node.lineno, node.value


def _library_files() -> Iterator[Path]:
    for package in LIBRARY:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.relative_to(ROOT) != LAYOUT_MODULE:
                yield path


def test_no_store_level_name_is_written_outside_the_layout_module() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in _library_files()
        for line, text in sorted(layout_literals(path.read_text()))
    ]
    assert not found, "use treestore.store.layout for these names:\n" + "\n".join(found)


def test_the_scan_finds_each_way_a_name_was_written_before_the_layout_module() -> None:
    source = '''
"""The store keeps CURRENT and versions/ (prose in a docstring is not a path)."""
LOCKS_FOLDER = "locks"
def f(pages, folder, shard, report, load):
    pages.exists("store.json")
    pages.list("rejected")
    name = f"trees/shard-{shard:04d}/run"
    marker = folder / "checkpoint"
    taken = [n for n in pages.list() if not n.startswith("locks/")]
    message = f"{pages.location}/CURRENT is damaged"
    counts = report["rejected"], load.get("expired", {}), {"dedup": 1}, "versions to keep"
'''
    assert sorted(line for line, _ in layout_literals(source)) == [3, 5, 6, 7, 8, 9, 10]


def test_the_layout_names_are_the_on_disk_format() -> None:
    assert layout.TOP_LEVEL == (
        "store.json",
        "CURRENT",
        "locks",
        "versions",
        "trees",
        "dedup",
        "rejected",
        "expired",
        "routed",
        "stream",
        "sweeps",
    )
    assert layout.routed_piece(layout.routed_folder("L"), 3, 12) == (
        "routed/L/shard-0003/00000012.arrow"
    )
    assert layout.manifest_name(7) == "versions/000007.json"
    assert layout.lease_name(12) == "locks/000012.json"
    assert [layout.number_of(n) for n in ("versions/000007.json", "locks/x.json")] == [7, None]
    assert layout.tree_folder(3) == "trees/shard-0003"
    assert layout.dedup_folder("a b/c", 12) == "dedup/a%20b%2Fc/shard-0012"
    assert layout.DEDUP_INDEX == "dedup/INDEX"
    assert layout.rejected_folder("20240101T000000-ab") == "rejected/20240101T000000-ab"
    assert layout.expired_file("s") == "expired/s.parquet"
    assert layout.expired_parts_folder("s") == "expired/s-shards"
    assert (layout.STREAM_CHECKPOINT, layout.STREAM_JOB, layout.STREAM_UNREADABLE) == (
        "stream/checkpoint",
        "stream/job.json",
        "stream/unreadable.json",
    )
    assert layout.sweep_folder("hits") == "sweeps/hits"


@pytest.mark.parametrize("shard", [0, 5])
def test_a_store_tree_writes_its_runs_in_the_shard_folder_the_layout_names(shard: int) -> None:
    pages = MemoryPageStore()
    with store_lock(pages, "a test"):
        StoreWriter(pages, 8)
    tree = open_version(pages).tree(shard)
    tree.visit(tree.root_handle, "a")
    state = tree.commit()
    assert [run.rsplit("/", 1)[0] for run in state.runs] == [layout.tree_folder(shard)]
    assert all(n.startswith(f"{layout.tree_folder(shard)}/") for n in pages.list(layout.TREES))


def test_a_tree_outside_a_store_writes_where_it_is_told() -> None:
    pages = MemoryPageStore()
    bare = ShardTree(pages, shard=2)
    bare.visit(bare.root_handle, "a")
    told = ShardTree(pages, shard=2, folder="elsewhere")
    told.visit(told.root_handle, "b")
    assert [bare.commit().runs[0].rsplit("/", 1)[0], told.commit().runs[0].rsplit("/", 1)[0]] == [
        "shard-0002",
        "elsewhere",
    ]
