"""Applying records to a tree: Hydra's element semantics, without Spark."""

from __future__ import annotations

from pathlib import Path

from loaders.job import load_job
from loaders.treebuild import ApplyStats, TreeBuilder
from query import parse_path, run_path
from treestore.tree import Tree


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
    tree, stats = Tree(), ApplyStats()
    for uid, ids in [("12345", ["1"]), ("67890", ["1", "2"]), ("12345", ["3", "4", "5"])]:
        builder.apply(tree.root, _record(builder, "ATTR", UID=uid, ATTRIBUTE_IDS=ids), stats)
    for uid, puid in [("12345", "abc"), ("99999", "nope"), ("67890", "xyz")]:
        builder.apply(tree.root, _record(builder, "MAPPING", UID=uid, PUID=puid), stats)
    root = tree.root.child("root")
    assert root is not None and root.hits == 6
    uid = root.child("12345")
    assert uid is not None and uid.hits == 3  # two attribute records, one mapping record
    assert uid.child("A").hits == 2  # type: ignore[union-attr]
    assert [n for n, _ in uid.child("A").sorted_children()] == ["1", "3", "4", "5"]  # type: ignore[union-attr]
    assert root.child("99999") is None  # create:false never creates
    assert stats.missed_updates == 1 and stats.records == 6
    rows = list(run_path(tree.root, parse_path("root/+:nodes>1/+/+")))
    assert ("12345", "M", "abc") in rows and ("67890", "A", "2") in rows
    assert all(r[0] != "99999" for r in rows)


def test_null_and_empty_values_stop_the_path(demo_dir: Path) -> None:
    builder = _builder(demo_dir)
    tree, stats = Tree(), ApplyStats()
    builder.apply(tree.root, _record(builder, "ATTR", UID=None, ATTRIBUTE_IDS=["1"]), stats)
    builder.apply(tree.root, _record(builder, "ATTR", UID="", ATTRIBUTE_IDS=["1"]), stats)
    builder.apply(
        tree.root, _record(builder, "ATTR", UID="7", ATTRIBUTE_IDS=["", None, "2"]), stats
    )
    root = tree.root.child("root")
    assert root is not None and sorted(root.children) == ["7"]
    assert sorted(root.child("7").child("A").children) == ["2"]  # type: ignore[union-attr]


def test_failing_element_filter_stops_that_branch(demo_dir: Path) -> None:
    builder = _builder(demo_dir)
    tree, stats = Tree(), ApplyStats()
    builder.apply(
        tree.root, _record(builder, "OTHER", UID="1", ATTRIBUTE_IDS=["1"], PUID="p"), stats
    )
    assert tree.root.child("root").children == {}  # type: ignore[union-attr]
