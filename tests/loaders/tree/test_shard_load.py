"""A shard's load phase by phase (records source by source, then the retry of pending
records) without Spark, and the pending records' form in a version's manifest."""

from __future__ import annotations

import copy
import json

import pyarrow as pa

from loaders.tree.builder import TreeBuilder
from loaders.tree.pending import SIDE_NAME, PendingState
from loaders.tree.shard_load import ShardLoad
from shell.demo import DEMO_JOB
from tests.support.record_tables import job_builder
from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.state import ShardState
from treestore.storage.tree import ShardTree

TODAY = {
    "bytes": 512,
    "next_id": 9,
    "nodes": 8,
    "pending": {
        "files": ["trees/shard-0000/0123456789ab-pending.arrow"],
        "records": 3,
        "time": 5000,
        "tree": "f00d",
    },
    "runs": ["trees/shard-0000/aaaaaaaaaaaa-000"],
}
"""A shard's manifest entry with pending records, as stores already hold it."""


def test_pending_records_keep_their_manifest_form() -> None:
    state = ShardState.from_json(TODAY)
    pending = PendingState.of(state)
    assert pending == PendingState(
        ("trees/shard-0000/0123456789ab-pending.arrow",), 3, 5000, "f00d"
    )
    assert json.dumps(state.to_json(), sort_keys=True) == json.dumps(TODAY, sort_keys=True)
    assert PendingState.of(None) == PendingState.of(ShardState()) == PendingState()
    assert PendingState().side_files() is None  # nothing waits, no watermark: no group
    only_time = PendingState((), 0, 7, "x").side_files()
    assert only_time is not None
    assert only_time.to_json() == {"files": [], "records": 0, "time": 7, "tree": "x"}


def _builder() -> TreeBuilder:
    job = copy.deepcopy(DEMO_JOB)
    job["tree"]["root"][1]["list"][1][0]["pending"] = {"loads": 2}
    return job_builder(job)


def _table(builder: TreeBuilder, source: str, **fields: object) -> pa.Table:
    """One record of ``source`` as the load task hands it over (fields, filter verdicts)."""
    attr, mapping = builder.filters
    verdicts = {attr.where: source == "ATTR", mapping.where: source == "MAPPING"}
    columns = {}
    for name in builder.key_fields:
        value = fields.get(name)
        columns[name] = pa.array(
            [value], pa.list_(pa.string()) if isinstance(value, list) else None
        )
    for where, column in builder.filter_columns.items():
        columns[column] = pa.array([verdicts[where]], pa.bool_())
    return pa.table({name: columns[name] for name in builder.fields})


def _paths(pages: MemoryPageStore, state: ShardState) -> set[tuple[str, ...]]:
    return {path for path, _ in ShardTree(pages, state).walk()}


def test_a_record_kept_in_one_load_is_applied_in_the_next() -> None:
    builder, pages = _builder(), MemoryPageStore()
    first = ShardLoad(builder, pages, 0, None)
    first.apply(_table(builder, "MAPPING", UID="u1", PUID="p"))
    state = first.finish()
    assert (first.stats.pending_buffered, first.waiting) == (1, 1)
    assert len(PendingState.of(state).files) == 1 and ("root", "u1") not in _paths(pages, state)

    second = ShardLoad(builder, pages, 0, state)
    second.apply(_table(builder, "ATTR", UID="u1", ATTRIBUTE_IDS=["a"]))
    state = second.finish()
    assert (second.stats.pending_applied, second.waiting) == (1, 0)
    assert SIDE_NAME not in state.side  # nothing waits any more
    assert ("root", "u1", "M", "p") in _paths(pages, state)


def test_a_later_record_of_the_same_load_makes_the_node_and_the_kept_one_applies() -> None:
    builder, pages = _builder(), MemoryPageStore()
    load = ShardLoad(builder, pages, 0, None)
    load.apply(_table(builder, "MAPPING", UID="u1", PUID="p"))  # before its UID: kept
    load.apply(_table(builder, "ATTR", UID="u1", ATTRIBUTE_IDS=["a"]))
    # records apply in order: a mapping after its UID's record finds the node at once
    load.apply(_table(builder, "ATTR", UID="u2", ATTRIBUTE_IDS=["b"]))
    load.apply(_table(builder, "MAPPING", UID="u2", PUID="q"))
    state = load.finish()
    assert (load.stats.pending_buffered, load.stats.pending_applied) == (1, 1)
    assert load.waiting == 0 and SIDE_NAME not in state.side
    assert {("root", "u1", "M", "p"), ("root", "u2", "M", "q")} <= _paths(pages, state)


def test_the_shards_expired_records_merge_into_one_file_with_every_column() -> None:
    """Two shards' parts (one without a column the other has) become one Parquet file
    holding every row; missing values are null and the parts are gone."""
    import io

    import pyarrow.parquet as pq

    from loaders.tree.pending import merge_expired

    pages = MemoryPageStore()
    first = pa.table({"U": ["u1", "u2"], "line": [2, 3], "why": ["a", "b"]})
    second = pa.table({"U": ["u3"], "P": ["p3"], "line": [7], "why": ["c"]})
    for name, table in (("x/shard-00000.parquet", first), ("x/shard-00001.parquet", second)):
        out = io.BytesIO()
        pq.write_table(table, out)
        pages.write(name, out.getvalue())
    rows = merge_expired(pages, ["x/shard-00000.parquet", "x/shard-00001.parquet"], "x.parquet")
    assert rows == 3
    merged = pq.read_table(io.BytesIO(pages.read("x.parquet")))
    assert merged.to_pylist() == [
        {"U": "u1", "line": 2, "why": "a", "P": None},
        {"U": "u2", "line": 3, "why": "b", "P": None},
        {"U": "u3", "line": 7, "why": "c", "P": "p3"},
    ]
    assert pages.list("x/") == []
