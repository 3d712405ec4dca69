"""The store as a Spark DataFrame: ``spark.read.format("treestore")`` and
``Rows.to_spark`` give exactly the query's rows, typed from the path, at one version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import treestore
from loaders import load_job, run_load
from treestore.errors import OpError
from treestore.store.versions import open_version

SCANS = [
    ("root/+/+:+hits", None),
    ("root/+:+hits,+nodes/+", None),
    ("root/+/+/+", None),
    ("root/+/M/+:+hits", None),
    ("root/+/+:+hits", "merge=kks"),  # a rop on columns
    ("root/+/+/+", "sort=0:a"),  # a rop on rows
]


def _frame_rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in frame.collect()), key=repr)


def _query_rows(store: Path, path: str, rops: str | None = None, version: int | None = None):
    handle = treestore.open(store)
    if version is not None:
        handle.store_version = open_version(store, version)
    return sorted(handle.query(path, rops=rops).to_list(), key=repr)


@pytest.mark.parametrize(("path", "rops"), SCANS)
def test_a_dataframe_holds_the_querys_rows(
    spark: Any, demo_store: Path, path: str, rops: str | None
) -> None:
    treestore.register(spark)
    reader = spark.read.format("treestore").option("query", path)
    if rops:
        reader = reader.option("rops", rops)
    frame = reader.load(str(demo_store))
    rows = treestore.open(demo_store, spark=spark).query(path, rops=rops)
    assert frame.columns == rows.column_names()
    assert _frame_rows(frame) == _query_rows(demo_store, path, rops)
    if rops is None:  # the same DataFrame from the rows (to_spark is read in every test)
        from_rows = treestore.open(demo_store, spark=spark).query(path).to_spark(spark)
        assert from_rows.schema == frame.schema


def test_the_schema_comes_from_the_path_without_a_spark_job(spark: Any, demo_store: Path) -> None:
    group = "treestore-schema-test"
    spark.sparkContext.setJobGroup(group, "schema only")
    try:
        frame = (
            treestore.open(demo_store, spark=spark).query("root/+:+hits,+nodes/+").to_spark(spark)
        )
        fields = [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]
        assert spark.sparkContext.statusTracker().getJobIdsForGroup(group) == []
    finally:
        spark.sparkContext.setJobGroup(None, None)  # type: ignore[arg-type]
    assert fields == [
        ("name", "string"),
        ("hits", "bigint"),
        ("nodes", "bigint"),
        ("name2", "string"),
    ]


def _csv_store(spark: Any, folder: Path, csv: str, shards: int, levels: list[Any]) -> Path:
    """A store loaded from one CSV file (header included), sharded by its column K, its
    tree ``root`` then ``levels``."""
    (folder / "in").mkdir(parents=True)
    (folder / "in" / "a.csv").write_text(csv)
    (folder / "job.json").write_text(json.dumps({
        "shards": shards,
        "source": [{"name": "c", "path": "in/", "format": "csv", "header": True,
                    "shard_by": "K"}],
        "tree": {"root": [{"type": "const", "value": "root"}, *levels]},
    }))  # fmt: skip
    run_load(spark, load_job(folder / "job.json"), folder / "store")
    return folder / "store"


def _attachment_store(spark: Any, folder: Path) -> Path:
    return _csv_store(spark, folder, "K,V,N,W\na,1,5,x\na,1,7,y\nb,2,2.5,x\nc,3,4,z\n", 4, [
        {"type": "value", "key": "K"},
        {"type": "value", "key": "V", "data": {
            "n": {"type": "sum", "key": "N"},
            "w": {"type": "count", "key": "W"},
        }},
    ])  # fmt: skip


def test_attachment_values_keep_their_types(spark: Any, tmp_path: Path) -> None:
    store = _attachment_store(spark, tmp_path)
    path = "root/+/+$+n$+w"
    frame = treestore.open(store, spark=spark).query(path).to_spark(spark)
    fields = [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]
    assert fields == [("name", "string"), ("name2", "string"), ("n", "double"), ("w", "double")]
    assert _frame_rows(frame) == [("a", "1", 12.0, 2.0), ("b", "2", 2.5, 1.0), ("c", "3", 4.0, 1.0)]
    assert _frame_rows(frame) == _query_rows(store, path)


def test_a_schema_given_by_the_caller_types_the_columns(spark: Any, demo_store: Path) -> None:
    treestore.register(spark)
    frame = (
        spark.read.format("treestore").schema("uid string, kind string, hits double")
        .option("query", "root/+/+:+hits").load(str(demo_store))
    )  # fmt: skip
    expected = [(u, k, float(h)) for u, k, h in _query_rows(demo_store, "root/+/+:+hits")]
    assert _frame_rows(frame) == expected
    wrong = (
        spark.read.format("treestore").schema("uid bigint, kind bigint, hits bigint")
        .option("query", "root/+/+:+hits").load(str(demo_store))
    )  # fmt: skip
    with pytest.raises(Exception, match=r"column 'kind' is typed int64 .* holds '[AM]'"):
        wrong.collect()


def test_an_older_version_reads_as_it_was(spark: Any, demo_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    run_load(spark, load_job(demo_dir / "job.json"), store)
    first = _query_rows(store, "root/+/+:+hits")
    more = demo_dir / "attributes" / "attributes-0002.tsv"
    more.write_text("TIME\tUID\tATTRIBUTE_IDS\n1700000000000\t99999\t7,8\n")
    run_load(spark, load_job(demo_dir / "job.json"), store)
    treestore.register(spark)
    newest = spark.read.format("treestore").option("query", "root/+/+:+hits").load(str(store))
    older = (
        spark.read.format("treestore").option("query", "root/+/+:+hits")
        .option("version", "1").load(str(store))
    )  # fmt: skip
    assert _frame_rows(older) == first
    assert _frame_rows(newest) == _query_rows(store, "root/+/+:+hits")
    assert _frame_rows(newest) != first


def test_filters_narrow_the_walk_only_when_asked_and_stay_exact(
    spark: Any, demo_store: Path
) -> None:
    treestore.register(spark)
    path = "root/+/+:+hits"
    every = _query_rows(demo_store, path)
    plain = spark.read.format("treestore").option("query", path).load(str(demo_store))
    # Spark 4.3 keeps a pushed scan on the DataFrame: without the option, a later query
    # of the same DataFrame must still read every row
    assert _frame_rows(plain.filter("name2 in ('M', 'Q')")) == [r for r in every if r[1] == "M"]
    assert _frame_rows(plain) == every
    for condition, keep in [
        ("name2 in ('M', 'Q')", lambda r: r[1] == "M"),
        ("name = '12345' and hits > 1", lambda r: r[0] == "12345" and r[2] > 1),
        ("name = '12345' and name = '67890'", lambda r: False),
        ("name2 <=> 'A' or name = '12345'", lambda r: r[1] == "A" or r[0] == "12345"),
    ]:
        pushed = (
            spark.read.format("treestore").option("query", path).option("pushdown", "true")
            .load(str(demo_store))
        )  # fmt: skip
        assert _frame_rows(pushed.filter(condition)) == [r for r in every if keep(r)], condition


def test_refusals_say_what_to_do(spark: Any, demo_store: Path) -> None:
    with pytest.raises(OpError, match="run on the driver, which a DataFrame does not have"):
        treestore.open(demo_store, spark=spark).query("root/+", ops="sort=0").to_spark(spark)
    treestore.register(spark)
    for options, said in [
        ({}, "no path to query"),
        ({"query": "root/+", "ops": "sort=0"}, "a DataFrame has no driver-side ops"),
        ({"query": "root/+", "version": "x"}, "takes a whole number"),
    ]:
        reader = spark.read.format("treestore")
        for name, value in options.items():
            reader = reader.option(name, value)
        with pytest.raises(Exception, match=said):
            reader.load(str(demo_store)).collect()


def test_a_column_the_first_rows_type_wrongly_is_named_with_the_way_out(
    spark: Any, demo_store: Path
) -> None:
    """``merge=kij`` runs on rows: the plan cannot type its columns, and the first rows
    (shards 1 and 2 of the demo hold one value per key) show whole numbers where later
    shards join several: the read stops naming the column, and a schema reads it."""
    rows = treestore.open(demo_store, spark=spark).query("root/+/+:+hits", rops="merge=kij")
    frame = rows.to_spark(spark)
    assert frame.schema.simpleString() == "struct<name:string,hits:bigint>"
    with pytest.raises(Exception, match=r"column 'hits' is typed int64 .* holds '2,1'"):
        frame.collect()
    typed = (
        spark.read.format("treestore").schema("name string, hits string")
        .option("query", "root/+/+:+hits").option("rops", "merge=kij").load(str(demo_store))
    )  # fmt: skip
    expected = [
        tuple(None if v is None else str(v) for v in row)
        for row in _query_rows(demo_store, "root/+/+:+hits", "merge=kij")
    ]
    assert _frame_rows(typed) == sorted(expected, key=repr)


def test_a_bad_path_read_by_spark_is_said_with_its_caret_and_no_deep_traceback(
    spark: Any, demo_store: Path
) -> None:
    treestore.register(spark)
    reader = spark.read.format("treestore").option("query", "root/+(")
    with pytest.raises(Exception, match=r"Unexpected '\(' in the path") as raised:
        reader.load(str(demo_store)).collect()
    said = str(raised.value)
    assert "root/+(\n        ^" in said  # the caret under the column
    assert said.count('File "') <= 1  # only where Spark called the source
    with pytest.raises(Exception, match="does not exist or is empty") as missing:
        reader.option("query", "root/+").load(str(demo_store / "nope")).collect()
    assert str(missing.value).count('File "') <= 1


def _skewed_store(spark: Any, folder: Path) -> Path:
    """8 shards by K: the shard of K=a holds 300 nodes, the others a few each."""
    rows = [f"a,{n}" for n in range(300)] + [f"{key},1" for key in "bcdefghijklmnop"]
    levels = [{"type": "value", "key": "K"}, {"type": "value", "key": "V"}]
    return _csv_store(spark, folder, "K,V\n" + "\n".join(rows) + "\n", 8, levels)


def test_a_dataframes_partitions_are_shards_cut_by_their_nodes(spark: Any, tmp_path: Path) -> None:
    from query.driver.shard_groups import shard_groups
    from query.driver.spark_source import TreestoreDataSource

    store, count = _skewed_store(spark, tmp_path), 3
    source = TreestoreDataSource(
        {"path": str(store), "query": "root/+/+", "partitions": str(count)}
    )
    groups = [partition.value for partition in source.reader(source.schema()).partitions()]
    states = open_version(store).manifest.trees
    big = max(states, key=lambda shard: states[shard].nodes)
    assert [shard for group in groups for shard in group] == sorted(states)
    assert len(groups) == count
    assert groups == shard_groups(sorted(states), states, count)
    assert (big,) in groups  # the big shard alone (by count: 3 shards with it)
    treestore.register(spark)
    frame = (
        spark.read.format("treestore")
        .option("query", "root/+/+")
        .option("partitions", str(count))
        .load(str(store))
    )
    assert frame.rdd.getNumPartitions() == count
    assert _frame_rows(frame) == _query_rows(store, "root/+/+")
