"""The service's catalog: the stores, one store's info, a node's children merged across
the shards and paged, the shell's completions, the op catalogue. A small 2-shard store
built without Spark, with small pages so a node's children span several of them."""

from __future__ import annotations

import io
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from query.driver.runner import QueryStore, open_store
from shell.output.info import write_info
from shell.repl.completer import NodeNames, ShellCompleter
from shell.repl.meta import ops_command
from shell.serve.catalog import (
    children_document,
    completions_document,
    op_document,
    ops_document,
    store_document,
    store_summary,
)
from treestore.errors import NodeNotFoundError, OpError
from treestore.storage.page_cache import reset_cache
from treestore.storage.pagestore import FilePageStore
from treestore.storage.runs import RunReader
from treestore.storage.tree import ShardTree
from treestore.store.layout import tree_folder
from treestore.store.lock import store_lock
from treestore.store.versions import StoreWriter, open_version

REPORT = {"sources": {}, "started": "2025-01-01 00:00:00", "seconds": 1.0}
ODD = ["a/b", "", "é", "日本", "\U0001f600", "Z", "n050x"]
"""Names with a slash, empty, accented, CJK, beyond U+FFFF, capital, between others."""

Visit = tuple[tuple[str, ...], int]
"""A path of names visited from the top, and its hits."""


def _visits() -> dict[int, list[list[Visit]]]:
    """Per shard, the visits of each load: shard 0 holds root's even children, shard 1
    every third (so multiples of 6 are in both), the odd names split between them."""
    first: dict[int, list[Visit]] = {0: [], 1: []}
    for i in range(600):
        for shard, step in ((0, 2), (1, 3)):
            if i % step == 0:
                first[shard].append((("root", f"n{i:03d}"), shard + 1))
    for number, name in enumerate(ODD):
        first[number % 2].append((("root", name), 7))
    first[0] += [(("root", "n000", "x"), 1), (("root", "n000", "y"), 1), (("only0",), 2)]
    first[0] += [(("root", ""), 3)]  # "" is in shard 1 too
    first[1] += [(("root", "n000", "y"), 4), (("root", "n000", "z"), 1)]
    second = {1: [(("root", "n003"), 5), (("root", "zz"), 1), (("root", "n003", "q"), 1)]}
    return {shard: [first[shard], second.get(shard, [])] for shard in (0, 1)}


def _build(folder: Path) -> Path:
    """Two versions of a 2-shard store: the second load adds to shard 1 (a second run)."""
    pages = FilePageStore(folder)
    with store_lock(pages, "a test"):
        states: dict[int, Any] = {}
        for load in range(2):
            writer = StoreWriter(pages, shards=2)
            changed = {}
            for shard, loads in _visits().items():
                if not loads[load]:
                    continue
                tree = ShardTree(
                    pages, states.get(shard), shard, 256, tree_folder(shard), writer.owner
                )
                for path, hits in loads[load]:
                    handle = tree.root_handle
                    for i, name in enumerate(path):
                        found = tree.visit(handle, name, hits=hits if i == len(path) - 1 else 0)
                        assert found is not None
                        handle = found
                changed[shard] = states[shard] = tree.commit()
            writer.publish(changed, {}, REPORT)
    return folder


def _expected(path: tuple[str, ...]) -> list[dict[str, Any]]:
    """The children of ``path`` as the visits make them, summed over the shards."""
    hits: Counter[str] = Counter()
    below: dict[str, set[tuple[int, str]]] = defaultdict(set)
    names: set[str] = set()
    for shard, loads in _visits().items():
        for visits in loads:
            for visited, count in visits:
                for depth in range(len(visited)):
                    prefix = visited[:depth]
                    if prefix == path:
                        names.add(visited[depth])
                        if depth == len(visited) - 1:
                            hits[visited[depth]] += count
                    if prefix[:-1] == path and prefix:
                        below[prefix[-1]].add((shard, visited[depth]))
    return [{"name": n, "hits": hits[n], "nodes": len(below[n])} for n in sorted(names)]


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("catalog") / "store")


@pytest.fixture
def store(store_dir: Path) -> QueryStore:
    return open_store(str(store_dir), None)


def test_the_summary_names_the_version_and_shards(store: QueryStore, store_dir: Path) -> None:
    assert store_summary("s", store) == {
        "name": "s",
        "location": str(store_dir),
        "version": 2,
        "shards": 2,
        "newest": 2,
    }


def test_children_are_merged_across_shards_with_hits_and_counts_summed(
    store: QueryStore,
) -> None:
    top = children_document("s", store, [], None, 10)
    assert top == {"store": "s", "version": 2, "path": [], "children": _expected(()), "next": None}
    assert [c["name"] for c in top["children"]] == ["only0", "root"]
    assert top["children"][1]["nodes"] > len(_expected(("root",)))  # each shard's, summed
    root = children_document("s", store, ["root"], None, 1000)["children"]
    assert root == _expected(("root",))
    by_name = {c["name"]: c for c in root}
    assert by_name["n000"] == {"name": "n000", "hits": 3, "nodes": 4}  # x, y | y, z
    assert by_name["n003"] == {"name": "n003", "hits": 7, "nodes": 1}  # 2, then 5 more
    assert by_name["n006"]["hits"] == 3 and by_name["n002"]["hits"] == 1
    assert by_name[""] == {"name": "", "hits": 10, "nodes": 0}  # 3 in shard 0, 7 in shard 1
    deeper = children_document("s", store, ["root", "n000"], None, 10)["children"]
    assert deeper == [
        {"name": "x", "hits": 1, "nodes": 0},
        {"name": "y", "hits": 5, "nodes": 0},
        {"name": "z", "hits": 1, "nodes": 0},
    ]


def test_names_come_in_utf8_byte_order(store: QueryStore) -> None:
    names = [c["name"] for c in children_document("s", store, ["root"], None, 1000)["children"]]
    assert names == sorted(names, key=lambda n: n.encode())
    assert names[0] == "" and names[-3:] == ["é", "日本", "\U0001f600"]
    assert names.index("Z") < names.index("a/b") < names.index("n000") < names.index("é")
    assert names.index("é") < names.index("日本") < names.index("\U0001f600")


def _pages(store: QueryStore, limit: int, after: str | None = None) -> Iterator[dict[str, Any]]:
    while True:
        page = children_document("s", store, ["root"], after, limit)
        yield page
        after = page["next"]
        if after is None:
            return


@pytest.mark.parametrize("limit", [1, 7, 50, 200])
def test_pages_follow_each_other_to_the_end(store: QueryStore, limit: int) -> None:
    expected = _expected(("root",))
    pages = list(_pages(store, limit))
    assert [c for page in pages for c in page["children"]] == expected
    assert all(len(page["children"]) == limit for page in pages[:-1])
    assert 0 < len(pages[-1]["children"]) <= limit
    assert [p["next"] for p in pages[:-1]] == [p["children"][-1]["name"] for p in pages[:-1]]


def test_after_is_any_name_even_one_no_shard_holds(store: QueryStore) -> None:
    expected = _expected(("root",))
    names = [c["name"] for c in expected]
    for after in ["", "a/b", "n005", "n0055", "é", "\U0001f600", "zz", "~"]:
        page = children_document("s", store, ["root"], after, 4)
        wanted = [c for c in expected if c["name"] > after][:4]
        assert page["children"] == wanted, after
        more = len([n for n in names if n > after]) > 4
        assert page["next"] == (wanted[-1]["name"] if more else None)


def test_a_page_reads_only_the_pages_it_needs(
    store: QueryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    reset_cache()
    read: list[tuple[str, int]] = []
    original = RunReader.page

    def counting(self: RunReader, number: int) -> Any:
        read.append((self.name, number))
        return original(self, number)

    monkeypatch.setattr(RunReader, "page", counting)
    version = store.store_version
    total = sum(len(store.tree(s, version).readers[0].pages) for s in (0, 1))
    read.clear()
    children_document("s", store, ["root"], "n050", 3)
    assert total > 40 and len(set(read)) <= 8, (total, sorted(set(read)))


def test_a_path_no_shard_has_names_its_first_missing_name(store: QueryStore) -> None:
    with pytest.raises(NodeNotFoundError, match="no node 'nope' under root/n000") as caught:
        children_document("s", store, ["root", "n000", "nope", "deeper"], None, 5)
    assert caught.value.name == "nope" and caught.value.missing == 2
    with pytest.raises(NodeNotFoundError, match="no node 'x' under the top"):
        children_document("s", store, ["x"], None, 5)
    # in one shard only: found
    assert children_document("s", store, ["only0"], None, 5)["children"] == []
    with pytest.raises(ValueError, match="at least 1"):
        children_document("s", store, [], None, 0)


def _shell_completions(store_dir: Path, text: str, cursor: int) -> list[dict[str, Any]]:
    completer = ShellCompleter(NodeNames(lambda: open_version(store_dir)))
    found = completer.get_completions(Document(text, cursor), CompleteEvent())
    return [
        {
            "text": c.text,
            "display": c.display_text,
            "meta": c.display_meta_text,
            "start": cursor + c.start_position,
        }
        for c in found
    ]


@pytest.mark.parametrize(
    ("text", "cursor"),
    [
        ("ro", 2),
        ("root/n00", 8),
        ("root/n00/x", 8),
        ("root/n000/", 10),
        ("root/+:no", 9),
        ("root/+ | rops mer", 17),
        ("root/+ | ops gather=", 20),
        ("root/+ | ops gather=k", 21),
        ("\\op", 3),
        ("\\ops me", 7),
        ("root/", 5),
        ("", 0),
    ],
)
def test_completions_are_the_shells(
    store: QueryStore, store_dir: Path, text: str, cursor: int
) -> None:
    found = completions_document(store, text, cursor)["completions"]
    assert found == _shell_completions(store_dir, text, cursor)
    if text.startswith("root/n00") or text == "ro":
        assert found, text


def test_completions_of_node_names_quote_odd_names_and_need_a_store(store: QueryStore) -> None:
    found = completions_document(store, "root/n00", 8)["completions"]
    assert [c["text"] for c in found][:3] == ["n000", "n002", "n003"]
    assert {c["start"] for c in found} == {5} and {c["meta"] for c in found} == {"node"}
    assert completions_document(None, "root/n00", 8) == {"completions": []}
    assert completions_document(None, "root/+ | ops mer", 99)["completions"] == [
        {"text": "merge=", "display": "merge=", "meta": found_meta("merge"), "start": 13}
    ]


def found_meta(op: str) -> str:
    """The first line of an op's help, as the catalogue lists it."""
    return next(o["summary"] for o in ops_document()["ops"] if o["name"] == op)


class _Recorder:
    def __init__(self) -> None:
        self.said: list[str] = []
        self.failed: list[str] = []

    def say(self, text: str) -> None:
        self.said.append(text)

    def fail(self, text: str) -> None:
        self.failed.append(text)


def test_the_op_catalogue_is_the_shells() -> None:
    shell = _Recorder()
    ops_command(shell, "")  # type: ignore[arg-type]
    ops = ops_document()["ops"]
    lines = [
        f"  {op['name']:<8} {op['summary']}"
        + (f" (also {', '.join(op['aliases'])})" if op["aliases"] else "")
        for op in ops
    ]
    assert lines == shell.said
    assert any(op["name"] == "gather" and op["aliases"] == ["top"] for op in ops)
    for name in ("merge", "top", "gather"):
        shell = _Recorder()
        ops_command(shell, name)  # type: ignore[arg-type]
        assert op_document(name) == {"name": name, "help": "\n".join(shell.said)}
    assert op_document("top")["help"].startswith("(top: also gather)\n")


def test_an_unknown_op_names_the_closest() -> None:
    with pytest.raises(OpError, match="No op called 'mrege'") as caught:
        op_document("mrege")
    assert "Did you mean merge" in str(caught.value) and caught.value.reason.startswith("No op")
    with pytest.raises(OpError, match="GET /ops lists the ops"):
        op_document("qqqqqqqq")


def test_the_store_document_says_what_info_says(store: QueryStore, store_dir: Path) -> None:
    doc = store_document("s", store)
    text = io.StringIO()
    write_info(str(store_dir), text)
    lines = text.getvalue().splitlines()
    assert doc["name"] == "s" and doc["location"] == str(store_dir) and doc["newest"] == 2
    assert (doc["version"], doc["kept"], doc["shards"], doc["inputs"]) == (2, [1, 2], 2, 0)
    assert lines[0] == f"store {doc['location']}"
    assert lines[1] == (
        f"version 2 (kept: 1, 2), 2 shards, {doc['nodes']:,} nodes, "
        f"{doc['bytes']:,} bytes of pages, 0 input files loaded"
    )
    for shard in doc["shard_trees"]:
        assert (
            f"  shard {shard['shard']}: {shard['nodes']:,} nodes, {shard['bytes']:,} bytes, "
            f"{shard['runs']} run(s)"
        ) in lines
    assert doc["nodes"] == sum(s["nodes"] for s in doc["shard_trees"]) > 100
    assert [load["version"] for load in doc["loads"]] == [1, 2]
    assert [line for line in lines if "load -> version" in line] == [
        f"  load -> version {v} at 2025-01-01 00:00:00 (1.0 s)" for v in (1, 2)
    ]
    assert doc["follower"] == {"running": False, "last": None}
    assert (doc["dedup"], doc["unpublished"], doc["unreadable"]) == (None, [], [])
