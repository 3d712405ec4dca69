"""A big shard's records built in parts give the tree built whole (but for node ids), and
jobs whose records cannot be split are built whole."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.tree import parts
from loaders.tree.builder import TreeBuilder
from loaders.tree.parts import HeldParts, Split, shard_parts, split_of
from loaders.tree.shard_load import ShardLoad
from shell.demo import DEMO_JOB
from tests.support.jobs import CLICKS_JOB
from tests.support.record_tables import job_builder, record_rows, record_table
from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.tree import ShardTree


def _builder(root: Any) -> TreeBuilder:
    job = root if isinstance(root, dict) else {**DEMO_JOB, "tree": {"root": root}}
    return job_builder(job)


def _demo(**changes: Any) -> dict[str, Any]:
    """The seed's job with settings added to its elements: ``root``, ``attr_uid``,
    ``attr_ids``, ``map_uid`` (each a dict of settings)."""
    job: Any = copy.deepcopy(DEMO_JOB)
    attribute, mapping = job["tree"]["root"][1]["list"]
    places: dict[str, dict[str, Any]] = {
        "root": job["tree"]["root"][0], "attr_uid": attribute[0], "attr_ids": attribute[2],
        "map_uid": mapping[0], "map_puid": mapping[2],
    }  # fmt: skip
    for place, settings_ in changes.items():
        places[place].update(settings_)
    return job


# -- which jobs split, and where ---------------------------------------------------------


def test_the_seeds_job_splits_on_the_uid_under_root() -> None:
    assert split_of(_builder(DEMO_JOB).elements) == Split("UID", None, (("root",),))
    clicks = split_of(_builder(CLICKS_JOB).elements)
    assert clicks == Split("UID", None, (("root",),))


def test_labels_and_defaults_are_part_of_the_split() -> None:
    root = [
        {"type": "const", "value": "top", "name": "all"},
        {"type": "value", "key": "K", "value": "none", "name": "keys"},
        {"type": "value", "key": "V", "once": True},
    ]
    assert split_of(_builder(root).elements) == Split("K", "none", (("all", "top", "keys"),))


@pytest.mark.parametrize(
    "root",
    [
        [{"type": "const", "value": "r", "once": True}, {"type": "value", "key": "K"}],
        [{"type": "const", "value": "r", "create": False}, {"type": "value", "key": "K"}],
        [
            {"type": "const", "value": "r", "data": {"n": {"type": "count", "key": "K"}}},
            {"type": "value", "key": "K"},
        ],
        [{"type": "value", "key": "K", "create": False, "name": "ks"}],
        [{"type": "const", "value": "only"}],
        [  # the branches part ways on different fields
            {
                "type": "branch",
                "list": [[{"type": "value", "key": "K"}], [{"type": "value", "key": "V"}]],
            },
        ],
        [  # one branch has no field that parts records
            {
                "type": "branch",
                "list": [[{"type": "value", "key": "K"}], [{"type": "const", "value": "c"}]],
            },
        ],
        [  # the same field, but another default for missing values
            {
                "type": "branch",
                "list": [
                    [{"type": "value", "key": "K", "value": "x"}],
                    [{"type": "value", "key": "K"}],
                ],
            },
        ],
    ],
)
def test_jobs_whose_upper_nodes_depend_on_record_order_are_built_whole(
    root: list[dict[str, Any]],
) -> None:
    builder = _builder(root)
    assert split_of(builder.elements) is None
    assert shard_parts({0: 10 * parts.PART_RECORDS}, builder) == {}
    assert ShardLoad(builder, MemoryPageStore(), 0, None, parts=4).parts == 1


def test_big_shards_get_a_part_per_part_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parts, "PART_RECORDS", 100)
    monkeypatch.setattr(parts, "PARTS_FROM", 350)
    builder = _builder(DEMO_JOB)
    assert shard_parts({0: 1000, 1: 349, 2: 351, 3: 0, 4: 1049}, builder) == {0: 10, 2: 4, 4: 10}


# -- the same tree, built whole or in parts ----------------------------------------------


def _content(pages: MemoryPageStore, load: ShardLoad) -> dict[tuple[str, ...], tuple[Any, ...]]:
    """Each node of the committed tree by path: hits, children and data (ids left out)."""
    tree = ShardTree(pages, load.tree.state, shard=load.shard)
    return {
        path: (node.hits, node.child_count, json.dumps(node.data, sort_keys=True, default=repr))
        for path, node in tree.walk()
    }


def _loads(
    builder: TreeBuilder,
    loads: list[list[tuple[pa.Table, int]]],
    parts_: int,
    limit: int,
    held_bytes: int | None = None,
) -> list[Any]:
    """What each load of ``loads`` (tables with their source) gives, in ``parts_`` parts
    (``held_bytes`` of records held in memory, the rest in files)."""
    pages, state, seen = MemoryPageStore(), None, []
    for tables in loads:
        load = ShardLoad(builder, pages, 3, state, parts=parts_, held_bytes=held_bytes)
        load.tree.memtable_limit = limit
        for table, source in tables:
            load.apply(table, source)
        state = load.finish()
        stats = load.stats
        seen.append(
            (
                _content(pages, load),
                (stats.records, stats.missed_updates, stats.bad_values),
                load.pending_counts(),
                load.tree.stats.nodes_created,
                state.nodes,
                state.next_id,
                {source: dict(counts) for source, counts in load.by_source.items()},
            )
        )
    return seen


_JOBS = {
    "seed": _demo(),
    "once": _demo(attr_ids={"once": True}),
    "pending": _demo(map_uid={"pending": {"loads": 2}}),
    "data": _demo(
        attr_uid={
            "data": {
                "n": {"type": "count", "key": "ATTRIBUTE_IDS"},
                "top": {"type": "key.top", "key": "ATTRIBUTE_IDS", "size": 2},
            }
        },
        map_puid={"data": {"seen": {"type": "key.top", "key": "UID", "size": 3}}},
    ),
    "labels": _demo(root={"name": "all"}, attr_uid={"name": "uids", "value": "none"}),
}


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(sorted(_JOBS)),
    st.lists(
        st.tuples(
            st.sampled_from(["ATTR", "MAPPING"]),
            st.sampled_from(["u1", "u2", "u3", "ü4", "u5", "", None]),
            st.lists(st.sampled_from(["1", "2", "3", "", None]), max_size=3),
            st.sampled_from(["p", "q", "r" * 20, None]),
        ),
        max_size=80,
    ),
    st.integers(1, 30),
    st.integers(2, 5),
    st.sampled_from([4, 1000]),
    st.sampled_from([0, 600, 1 << 30]),
)
def test_a_shard_built_in_parts_is_the_tree_built_whole(
    job: str,
    records: list[tuple[Any, ...]],
    batch_size: int,
    parts_: int,
    limit: int,
    held_bytes: int,
) -> None:
    """Two loads (the second on the first's tree), whole and in parts: the same nodes with
    the same hits, children and data, the same counts and pending records; with a memtable
    of 4 entries, flushes and lookups in runs happen within parts too; the records held in
    files, in memory, or the first in memory and the rest in files."""
    builder = _builder(_JOBS[job])
    rows = record_rows(builder, records)
    sources = [int(source == "MAPPING") for source, *_ in records]
    tables = [
        (record_table(builder, rows[i : i + batch_size]), sources[i])
        for i in range(0, len(rows), batch_size)
    ]
    half = len(tables) // 2
    loads = [tables, tables[half:]]
    whole = _loads(builder, loads, 1, limit)
    in_parts = _loads(builder, loads, parts_, limit, held_bytes)
    assert in_parts == whole


def _seed_tables(builder: TreeBuilder, attributes: int, mappings: int) -> list[pa.Table]:
    rng = np.random.default_rng(5)
    attribute, mapping = builder.filter_columns.values()
    rows = [
        {"UID": f"u{u}", "ATTRIBUTE_IDS": [str(i) for i in rng.integers(1, 50, 3).tolist()],
         attribute: True, mapping: False}
        for u in rng.integers(0, attributes // 2, attributes).tolist()
    ]  # fmt: skip
    rows += [
        {"UID": f"u{u}", "PUID": f"p{p}", attribute: False, mapping: True}
        for u, p in zip(
            rng.integers(0, attributes, mappings).tolist(),
            rng.integers(0, mappings // 10, mappings).tolist(),
            strict=True,
        )
    ]
    return [record_table(builder, rows[i : i + 2000]) for i in range(0, len(rows), 2000)]


def test_the_seeds_records_in_parts_make_the_same_tree_in_fewer_structures() -> None:
    """The seed's records in 4 parts: the tree built whole, each part's records applied
    to a memtable emptied but for the shared nodes (the root and ``root``), one run."""
    builder = _builder(DEMO_JOB)
    tables = [(t, 0) for t in _seed_tables(builder, 3000, 12000)]
    whole = _loads(builder, [tables], 1, 1 << 20)
    pages = MemoryPageStore()
    load = ShardLoad(builder, pages, 3, None, parts=4)
    largest: list[int] = []
    end_part = load.tree.end_part

    def watched(shared: Any) -> None:
        largest.append(len(load.tree.memtable))
        end_part(shared)
        assert len(load.tree.memtable) == 2  # the internal root and root: kept for the next

    load.tree.end_part = watched  # type: ignore[method-assign]
    for table, source in tables:
        load.apply(table, source)
    assert load.tree.stats.nodes_created == 0  # held until the reading is done
    load.finish()
    assert len(largest) == 4
    assert max(largest) < 0.4 * whole[0][3]  # each part's memtable a quarter of the tree
    assert _content(pages, load) == whole[0][0]
    assert len(load.tree.state.runs) == 1  # the parts are written together


def test_a_list_in_the_split_field_builds_what_was_held_and_goes_on_whole() -> None:
    builder = _builder([{"type": "value", "key": "K"}, {"type": "value", "key": "V"}])
    text = pa.table({"K": ["a", "b", "a"], "V": ["1", "2", "3"]})
    lists = pa.table({"K": pa.array([["a", "c"], ["b"]], pa.list_(pa.string())), "V": ["4", "5"]})
    results = []
    for parts_ in (1, 3):
        pages = MemoryPageStore()
        load = ShardLoad(builder, pages, 0, None, parts=parts_)
        for table in (text, lists, text):
            load.apply(table)
        load.finish()
        results.append(_content(pages, load))
    assert results[0] == results[1]
    assert results[0][("a",)][0] == 5 and results[0][("c", "4")][0] == 1


@pytest.mark.parametrize("memory_bytes", [0, 100, 1 << 30])
def test_held_records_keep_their_order_and_source_within_each_part(memory_bytes: int) -> None:
    """Held in files, in memory, or the first batch in memory and the second in files:
    each part gives its records in their order, with their source."""
    split = Split("K", "none")
    held = HeldParts(split, 3, memory_bytes=memory_bytes)
    first = pa.table({"K": ["a", "b", None, "c", "a"], "n": [0, 1, 2, 3, 4]})
    second = pa.table({"K": ["c", "b", "a"], "n": [5, 6, 7]})
    held.hold(first, 0)
    held.hold(second, 1)
    folder = held._folder
    if memory_bytes == 1 << 30:
        assert folder is None  # all in memory
    else:
        in_files = second if memory_bytes else pa.concat_tables([first, second])
        assert folder is not None and len(list(folder.iterdir())) == len(
            set(split.parts_of(in_files, 3).tolist())
        )
    seen = [
        [(table.column("n").to_pylist(), source) for table, source in part]
        for part in held.parts_in_order()
    ]
    expected: dict[int, list[tuple[list[int], int]]] = {}
    for table, source in ((first, 0), (second, 1)):
        by_part: dict[int, list[int]] = {}
        numbers = split.parts_of(table, 3).tolist()
        for number, n in zip(numbers, table.column("n").to_pylist(), strict=True):
            by_part.setdefault(number, []).append(n)
        for number, ns in by_part.items():
            expected.setdefault(number, []).append((ns, source))
    assert seen == [expected[n] for n in sorted(expected)]
    assert sorted(n for part in seen for ns, _ in part for n in ns) == list(range(8))
    held.close()
    assert folder is None or not folder.exists()
