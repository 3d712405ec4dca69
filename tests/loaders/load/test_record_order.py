"""Records apply in Hydra's order: sources in job order, a source's files in path order,
lines in file order; an update-only element sees every node an earlier record made
(of the same source and file too), and none a later record makes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loaders import load_job, run_load
from treestore.store.versions import open_version

pytestmark = pytest.mark.spark

JOB = {
    "shards": 1,
    "source": [{"name": "events", "path": "in/", "format": "json", "shard_by": "U"}],
    "tree": {
        "root": [
            {"type": "const", "value": "root"},
            {
                "type": "branch",
                "list": [
                    [  # only a record with K makes its U (a path makes nodes as it goes)
                        {
                            "type": "value",
                            "key": "U",
                            "filter": {
                                "op": "field",
                                "from": "K",
                                "filter": {"op": "empty", "not": True},
                            },
                        },
                        {"type": "value", "key": "K"},
                    ],
                    [
                        {"type": "value", "key": "U", "create": False},
                        {"type": "value", "key": "M"},
                    ],
                    [
                        {"type": "value", "key": "U", "create": False},
                        {"type": "value", "key": "M", "create": False},
                        {"type": "value", "key": "N"},
                    ],
                ],
            },
        ]
    },
}
MAKES_U = {"U": "u1", "K": "a"}
UPDATES_U = {"U": "u1", "M": "x"}  # update-only under U: needs the record above
NEEDS_M = {"U": "u1", "M": "x", "N": "y"}  # update-only under U and M: needs both above


def _load(tmp_path: Path, files: dict[str, list[dict[str, Any]]], spark: Any) -> tuple[set, Any]:  # type: ignore[type-arg]
    (tmp_path / "in").mkdir(parents=True)
    (tmp_path / "job.json").write_text(json.dumps(JOB))
    for name, records in files.items():
        (tmp_path / "in" / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    report = run_load(spark, load_job(tmp_path / "job.json"), tmp_path / "store").report
    paths = {path for path, _ in open_version(tmp_path / "store").tree(0).walk()}
    return paths, report["sources"]["events"]


def test_records_of_one_file_apply_one_after_another(spark: Any, tmp_path: Path) -> None:
    paths, counts = _load(tmp_path, {"a.json": [MAKES_U, UPDATES_U, NEEDS_M]}, spark)
    assert {("root", "u1", "a"), ("root", "u1", "x"), ("root", "u1", "x", "y")} <= paths
    assert counts["missed_updates"] == 0


def test_files_apply_in_path_order_whatever_order_spark_reads_them(
    spark: Any, tmp_path: Path
) -> None:
    """The later file is much bigger, so Spark reads it first; its updates still come
    after the earlier file's record that makes their node. The other way round, every
    update misses."""
    padding = [{"U": f"other{i}", "K": "k"} for i in range(3000)]
    paths, counts = _load(
        tmp_path / "first", {"a.json": [MAKES_U], "b.json": [*padding, UPDATES_U, NEEDS_M]}, spark
    )
    assert ("root", "u1", "x", "y") in paths and counts["missed_updates"] == 0
    paths, counts = _load(
        tmp_path / "second", {"a.json": [*padding, UPDATES_U, NEEDS_M], "b.json": [MAKES_U]}, spark
    )
    assert ("root", "u1", "x") not in paths and counts["missed_updates"] == 2
