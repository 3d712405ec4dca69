"""Tree elements, their options and data attachments, loaded through Spark and read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loaders import load_job, run_load
from treestore.attachments import read_attachment, top_entries
from treestore.store.versions import open_version

pytestmark = pytest.mark.spark


def load_tree(
    spark: Any, folder: Path, rows: list[str], root: list[Any], **job: Any
) -> dict[tuple[str, ...], Any]:
    """Load ``rows`` (csv text lines, header first) with tree ``root``; path -> node."""
    (folder / "in").mkdir(exist_ok=True)
    number = len(list((folder / "in").iterdir()))
    (folder / "in" / f"part-{number}.csv").write_text("\n".join(rows) + "\n")
    doc = {
        "shards": 1,
        "source": [{"name": "s", "path": "in/", "format": "csv"}],
        "tree": {"root": root},
        **job,
    }
    (folder / "job.json").write_text(json.dumps(doc))
    run_load(spark, load_job(folder / "job.json"), folder / "store")
    return dict(open_version(folder / "store").tree(0).walk())


def test_const_value_and_branch_with_hits(spark: Any, tmp_path: Path) -> None:
    nodes = load_tree(
        spark,
        tmp_path,
        ["K,V", "a,1", "a,2", "a,1", "b,"],
        [
            {"type": "const", "value": "top"},
            {
                "type": "branch",
                "list": [
                    [{"type": "value", "key": "K"}, {"type": "value", "key": "V"}],
                    [{"type": "const", "value": "all"}],
                ],
            },
        ],
    )
    hits = {path: node.hits for path, node in nodes.items()}
    assert hits == {
        ("top",): 4,
        ("top", "a"): 3,
        ("top", "a", "1"): 2,
        ("top", "a", "2"): 1,
        ("top", "b"): 1,  # an empty value stops the path under it
        ("top", "all"): 4,
    }
    assert nodes[("top",)].child_count == 3 and nodes[("top", "a")].child_count == 2


def test_element_options_once_count_name_default_and_create(spark: Any, tmp_path: Path) -> None:
    root = [
        {"type": "const", "value": "r", "count": False},
        {
            "type": "branch",
            "list": [
                [{"type": "value", "key": "K", "once": True}, {"type": "const", "value": "under"}],
                [{"type": "value", "key": "K", "name": "byK"}],
                [{"type": "value", "key": "MISSING", "value": "none"}],
                [
                    {"type": "const", "value": "u"},
                    {"type": "value", "key": "K", "create": False},
                ],
            ],
        },
    ]
    nodes = load_tree(spark, tmp_path, ["K", "a", "a", "b"], root)
    hits = {path: node.hits for path, node in nodes.items()}
    assert hits[("r",)] == 0  # count: false
    assert hits[("r", "a")] == 1 and hits[("r", "b")] == 1  # once: one hit, at creation
    assert hits[("r", "a", "under")] == 1  # the rest of the path runs only at creation
    assert hits[("r", "byK")] == 3 and hits[("r", "byK", "a")] == 2  # name: a const above
    assert hits[("r", "none")] == 3  # value: the default of a missing field
    assert hits[("r", "u")] == 3 and nodes[("r", "u")].child_count == 0  # create: false
    report = open_version(tmp_path / "store").manifest.loads[-1]
    assert report["sources"]["s"]["missed_updates"] == 3
    # a second load: once adds nothing to existing nodes; create: false now finds "a"
    nodes = load_tree(spark, tmp_path, ["K", "a", "c"], root)
    hits = {path: node.hits for path, node in nodes.items()}
    assert hits[("r", "a")] == 1 and hits[("r", "c")] == 1
    assert hits[("r", "a", "under")] == 1 and hits[("r", "c", "under")] == 1
    assert nodes[("r", "u")].child_count == 0
    report = open_version(tmp_path / "store").manifest.loads[-1]
    assert report["sources"]["s"]["missed_updates"] == 2


def test_data_attachments_sum_count_top_and_time(spark: Any, tmp_path: Path) -> None:
    root = [
        {
            "type": "value",
            "key": "K",
            "data": {
                "total": {"type": "sum", "key": "N"},
                "users": {"type": "count", "key": "U"},
                "top": {"type": "key.top", "key": "U", "size": 2},
                "seen": {"type": "time", "key": "T"},
            },
        }
    ]
    rows = ["K,N,U,T", "a,1,u1,500", "a,2.5,u2,100", "a,1,u1,500", "a,,u1,900", "b,4,u9,7"]
    node = load_tree(spark, tmp_path, rows, root)[("a",)]
    assert node.hits == 4
    assert read_attachment(node.data, "total") == 4.5
    assert read_attachment(node.data, "total", "num") == 4  # a missing N counts as 0
    assert read_attachment(node.data, "users") == 2
    assert top_entries(node.data["top"][1]) == [("u1", 3, 0), ("u2", 1, 0)]
    assert read_attachment(node.data, "seen", "first") == 100
    assert read_attachment(node.data, "seen", "last") == 900
    # a later load merges into the stored summaries (delta runs carry the whole state)
    node = load_tree(spark, tmp_path, ["K,N,U,T", "a,10,u3,50", "a,1,u3,60", "a,1,u3,70"], root)[
        ("a",)
    ]
    assert read_attachment(node.data, "total") == 16.5
    assert read_attachment(node.data, "users") == 3
    assert top_entries(node.data["top"][1]) == [("u1", 3, 0), ("u3", 4, 1)][::-1]
    assert read_attachment(node.data, "seen", "life") == 900 - 50


def test_identical_records_apply_once_with_their_count(spark: Any, tmp_path: Path) -> None:
    rows = ["K,V", *["x,y"] * 500, *[f"x,{i}" for i in range(50)]]
    nodes = load_tree(
        spark,
        tmp_path,
        rows,
        [{"type": "value", "key": "K"}, {"type": "value", "key": "V"}],
    )
    assert nodes[("x",)].hits == 550 and nodes[("x", "y")].hits == 500
    report = open_version(tmp_path / "store").manifest.loads[-1]
    assert report["sources"]["s"]["applied"] == 550
    assert report["shards"]["0"]["nodes_created"] == 52


def test_attachments_are_queried_through_spark(spark: Any, tmp_path: Path) -> None:
    import treestore

    root = [
        {
            "type": "value",
            "key": "K",
            "data": {
                "total": {"type": "sum", "key": "N"},
                "top": {"type": "key.top", "key": "U", "size": 3},
            },
        }
    ]
    load_tree(spark, tmp_path, ["K,N,U", "a,1,x", "a,2,y", "a,3,x", "b,4,z"], root)
    store = treestore.open(tmp_path / "store", spark=spark)
    rows = store.query("+$+total=sum,num").to_list()
    assert sorted(rows) == [("a", 6, 3), ("b", 4, 1)]
    assert store.query("a/+%top:+hits").to_list() == [("x", 2), ("y", 1)]
    assert store.query("+;$+total").to_list() == [("a,b", "6,4")]
