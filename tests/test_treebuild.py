"""Applying records to a tree: Hydra's element semantics, without Spark."""

from __future__ import annotations

from pathlib import Path

from loaders.job import load_job
from loaders.treebuild import ApplyStats, TreeBuilder
from query import parse_path, run_path
from treestore.pagestore import MemoryPageStore
from treestore.tree import ShardTree


def _builder(demo_dir: Path) -> TreeBuilder:
    return TreeBuilder(load_job(demo_dir / "job.json").tree)


def _record(builder: TreeBuilder, source: str, **fields: object) -> dict[str, object]:
    """A record as the loader hands it over: fields plus each element filter's verdict."""
    record: dict[str, object] = dict(fields)
    attr, mapping = builder.filters  # the two UID elements, in job order
    record[builder.filter_columns[attr.where]] = source == "ATTR"
    record[builder.filter_columns[mapping.where]] = source == "MAPPING"
    return record


def test_seed_tree_is_built_with_hits_and_create_false(demo_dir: Path) -> None:
    builder = _builder(demo_dir)
    tree, stats = ShardTree(MemoryPageStore()), ApplyStats()
    for uid, ids in [("12345", ["1"]), ("67890", ["1", "2"]), ("12345", ["3", "4", "5"])]:
        builder.apply(tree, _record(builder, "ATTR", UID=uid, ATTRIBUTE_IDS=ids), stats)
    for uid, puid in [("12345", "abc"), ("99999", "nope"), ("67890", "xyz")]:
        builder.apply(tree, _record(builder, "MAPPING", UID=uid, PUID=puid), stats)
    tree = ShardTree(tree.store, tree.commit())
    root = tree.child(tree.root, "root")
    assert root is not None and root.hits == 6
    uid = tree.child(root, "12345")
    assert uid is not None and uid.hits == 3  # two attribute records, one mapping record
    attributes = tree.child(uid, "A")
    assert attributes is not None and attributes.hits == 2
    assert [n.name for n in tree.children(attributes)] == ["1", "3", "4", "5"]
    assert tree.child(root, "99999") is None  # create:false never creates
    assert stats.missed_updates == 1 and stats.records == 6
    rows = list(run_path(tree, parse_path("root/+:nodes>1/+/+")))
    assert ("12345", "M", "abc") in rows and ("67890", "A", "2") in rows
    assert all(r[0] != "99999" for r in rows)


def test_null_and_empty_values_stop_the_path(demo_dir: Path) -> None:
    builder = _builder(demo_dir)
    tree, stats = ShardTree(MemoryPageStore()), ApplyStats()
    builder.apply(tree, _record(builder, "ATTR", UID=None, ATTRIBUTE_IDS=["1"]), stats)
    builder.apply(tree, _record(builder, "ATTR", UID="", ATTRIBUTE_IDS=["1"]), stats)
    builder.apply(tree, _record(builder, "ATTR", UID="7", ATTRIBUTE_IDS=["", None, "2"]), stats)
    tree = ShardTree(tree.store, tree.commit())
    paths = [path for path, _ in tree.walk()]
    assert paths == [("root",), ("root", "7"), ("root", "7", "A"), ("root", "7", "A", "2")]


def test_failing_element_filter_stops_that_branch(demo_dir: Path) -> None:
    builder = _builder(demo_dir)
    tree, stats = ShardTree(MemoryPageStore()), ApplyStats()
    builder.apply(tree, _record(builder, "OTHER", UID="1", ATTRIBUTE_IDS=["1"], PUID="p"), stats)
    tree = ShardTree(tree.store, tree.commit())
    assert [path for path, _ in tree.walk()] == [("root",)]
