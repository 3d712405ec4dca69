"""The load's Arrow path routes the records the Spark path routes, value for value: the same
pieces with the same records (shard, dedup key and hash, the map's verdict and fields,
element filters, reject reasons, injected names), dedup keys as Spark's ``to_json`` writes
them, and the same trees; a job with a filter that has no Arrow form maps in Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loaders.load.route_job as route_job
import treestore
from loaders import load_job, run_load
from loaders.listing.files import list_input_files
from loaders.load.protocol import lists_from_text
from loaders.load.route_job import RouteJob
from loaders.route.arrow_map import json_keys
from loaders.tree.builder import TreeBuilder
from shell.demo import DEMO_JOB
from treestore import native
from treestore.sharding import HASH_SEED
from treestore.storage.pagestore import FilePageStore

pytestmark = pytest.mark.spark

_TEXT = st.text(alphabet=st.sampled_from(['"', "\\", "\n", "\t", "\x01", "\x1f", "é", "😀", "a"]))
_VALUE = st.none() | _TEXT
_LIST = st.none() | st.lists(_VALUE, max_size=3)


# 6 examples of up to 40 rows, not the profile's count: each is a Spark job
@settings(max_examples=6, deadline=None)
@given(rows=st.lists(st.tuples(_VALUE, _LIST, _VALUE), min_size=1, max_size=40))
def test_dedup_keys_are_sparks_to_json_and_hash(spark: Any, rows: list[Any]) -> None:
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(
        [(i, *row) for i, row in enumerate(rows)], "i int, a string, l array<string>, b string"
    )
    key = F.to_json(
        F.struct(
            F.col("a").alias("0"),
            F.col("l").alias("1"),
            F.lit(None).cast("string").alias("2"),  # a key the source lacks
            F.col("b").alias("3"),
        )
    )
    got = frame.select("i", key.alias("k"), F.xxhash64(key).alias("h")).orderBy("i").collect()
    ours = json_keys(
        [
            pa.array([r[0] for r in rows], pa.string()),
            pa.array([r[1] for r in rows], pa.list_(pa.string())),
            None,
            pa.array([r[2] for r in rows], pa.string()),
        ]
    )
    assert ours.to_pylist() == [row["k"] for row in got]
    assert native.xxhash64(ours, HASH_SEED).tolist() == [row["h"] for row in got]


JOB: dict[str, Any] = {
    "shards": 4,
    "source": [
        json.loads(json.dumps(DEMO_JOB["source"][0])),  # the demo's attributes, deduplicated
        {
            "name": "events",
            "path": "events/",
            "format": "json",
            "shard_by": "UID",
            "inject_source_name": "TAGS",
        },
        {"name": "mapping", "path": "mapping/", "format": "tsv", "header": True,
         "shard_by": "UID"},
    ],
    "map": {
        "filter_in": {"from": "UID", "filter": {"op": "empty", "not": True}, "nullFail": False},
        "filter_out": [
            {"from": "ATTRIBUTE_IDS", "filter": {"op": "split", "split": ","}, "nullFail": False},
            {"from": "PUID", "to": "P2", "filter": [{"op": "empty", "not": True}]},
        ],
    },
    "tree": {
        "root": [
            {"type": "const", "value": "root"},
            {
                "type": "branch",
                "list": [
                    [
                        {"type": "value", "key": "UID",
                         "filter": {"from": "ATTR", "filter": {"op": "empty", "not": True}}},
                        {"type": "value", "key": "ATTRIBUTE_IDS"},
                    ],
                    [{"type": "value", "key": "UID"}, {"type": "value", "key": "TAGS"}],
                    [
                        {"type": "value", "key": "UID", "create": False},
                        {"type": "value", "key": "P2"},
                    ],
                ],
            },
        ]
    },
}  # fmt: skip


def _inputs(folder: Path) -> None:
    (folder / "job.json").write_text(json.dumps(JOB))
    for name in ("attributes", "events", "mapping"):
        (folder / name).mkdir()
    (folder / "attributes" / "a1.tsv").write_text(
        'TIME\tUID\tATTRIBUTE_IDS\n1\tu1\t1,2\n2\tu2\t3\n2\tu2\t3\n3\tu"q\t,,\n'
        "4\t\t5\n5\tu3\n6\tu4\tx,é😀\n"  # a duplicate; an empty UID; a short row
    )
    (folder / "attributes" / "a2.tsv").write_text("TIME\tUID\tATTRIBUTE_IDS\n7\tu1\t9\n")
    (folder / "events" / "e.json").write_text(
        '{"UID": "u1", "TAGS": ["t1", "t2"]}\n{"UID": "u9", "TAGS": []}\nnot json\n'
        '{"UID": "u2"}\n{"UID": "u5", "TAGS": ["t3", null]}\n'
    )
    (folder / "mapping" / "m.tsv").write_text("UID\tPUID\nu1\tp1\nu2\t\nu7\tp7\nu3\tp3\n")


def _routed(spark: Any, folder: Path, arrow: bool, monkeypatch: Any) -> tuple[str, dict[str, Any]]:
    """Plan and run the first job of a load of ``folder``'s job into a scratch store: how
    it mapped, and every piece's records as Python rows (lists as lists)."""
    job = load_job(folder / "job.json")
    fresh = {i: list_input_files(source) for i, source in enumerate(job.sources)}
    pages = FilePageStore(folder / f"scratch-{arrow}")
    monkeypatch.setattr(route_job, "ARROW_MAP", arrow)
    first = RouteJob.plan(spark, job, TreeBuilder(job.tree), fresh, pages, "routed/t")
    pieces = first.run()
    found: dict[str, Any] = {"fingerprints": first.fingerprints.taken(first.numbers)}
    for shard, names in pieces.by_shard.items():
        for name in names:
            table = pages.read_table(name)
            batch = lists_from_text(table.combine_chunks().to_batches()[0], first.text_lists)
            found[name] = (shard, batch.schema.names, batch.to_pylist())
    return first.map_in, found


def test_both_paths_route_the_same_records(spark: Any, tmp_path: Path, monkeypatch: Any) -> None:
    _inputs(tmp_path)
    arrow_way, by_arrow = _routed(spark, tmp_path, True, monkeypatch)
    spark_way, by_spark = _routed(spark, tmp_path, False, monkeypatch)
    assert (arrow_way, spark_way) == ("Arrow", "Spark")
    assert by_arrow.keys() == by_spark.keys() and len(by_arrow) > 4
    for name in by_arrow:
        assert by_arrow[name] == by_spark[name], name
    assert len(by_arrow["fingerprints"]) == 4


def test_both_paths_give_the_same_trees_and_counts(
    spark: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    _inputs(tmp_path)
    seen = {}
    for arrow in (True, False):
        monkeypatch.setattr(route_job, "ARROW_MAP", arrow)
        store = tmp_path / f"store-{arrow}"
        report = run_load(spark, load_job(tmp_path / "job.json"), store).report
        assert f"read and map ({'Arrow' if arrow else 'Spark'})" in report["phases"]
        rows = treestore.open(store, spark=spark).query("+/+/+/+:+hits").to_list()
        seen[arrow] = (sorted(map(repr, rows)), report["sources"], report["rejected"]["count"])
    assert seen[True] == seen[False]
    assert seen[True][2] == 2  # the short row and the line that is not JSON


def test_a_filter_without_an_arrow_form_maps_in_spark(spark: Any, tmp_path: Path) -> None:
    _inputs(tmp_path)
    doc = json.loads((tmp_path / "job.json").read_text())
    doc["map"]["filter_in"] = {"from": "UID", "filter": {"op": "case", "upper": True}}
    (tmp_path / "job.json").write_text(json.dumps(doc))
    job = load_job(tmp_path / "job.json")
    fresh = {i: list_input_files(source) for i, source in enumerate(job.sources)}
    pages = FilePageStore(tmp_path / "scratch")
    first = RouteJob.plan(spark, job, TreeBuilder(job.tree), fresh, pages, "routed/t")
    assert first.map_in == "Spark"
