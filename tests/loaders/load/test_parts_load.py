"""Through Spark: a load whose shards are big for their part size builds them in parts, and
the store answers as one loaded whole (first load and incremental)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import treestore
from loaders import load_job, run_load
from loaders.tree import parts
from shell.demo import DEMO_ANSWER_OPS, DEMO_ANSWER_ROPS, DEMO_JOB, DEMO_PATH
from treestore.store.versions import open_version

pytestmark = pytest.mark.spark


def _write_inputs(folder: Path, number: int, seed: int) -> None:
    """The seed's two tables, generated: attribute rows with 1-3 ids, mapping rows, a third
    of them with a UID no attribute row has."""
    rng = np.random.default_rng(seed)
    attributes = ["TIME\tUID\tATTRIBUTE_IDS"]
    for i, (uid, count) in enumerate(
        zip(rng.integers(0, 150, 400).tolist(), rng.integers(1, 4, 400).tolist(), strict=True)
    ):
        ids = ",".join(str(v) for v in rng.integers(1, 30, count).tolist())
        attributes.append(f"{seed * 1000 + i}\tu{uid}\t{ids}")
    mapping = ["UID\tPUID"]
    for uid, puid in zip(
        rng.integers(0, 225, 1200).tolist(), rng.integers(0, 60, 1200).tolist(), strict=True
    ):
        mapping.append(f"u{uid}\tp{puid}")
    for name, lines in (("attributes", attributes), ("mapping", mapping)):
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / f"{name}-{number:04d}.tsv").write_text("\n".join(lines) + "\n")


def _load_twice(spark: Any, folder: Path) -> tuple[list[Any], dict[str, Any], list[Any]]:
    """Two loads of the generated seed tables; the answer, the last report's shards and
    every shard's tree (path -> hits, children, data)."""
    job = {**DEMO_JOB, "shards": 2}
    folder.mkdir()
    (folder / "job.json").write_text(json.dumps(job))
    for number in (1, 2):
        _write_inputs(folder, number, seed=number)
        run_load(spark, load_job(folder / "job.json"), folder / "store")
    version = open_version(folder / "store")
    trees = [
        {path: (n.hits, n.child_count, n.data) for path, n in version.tree(shard).walk()}
        for shard in range(2)
    ]
    store = treestore.open(folder / "store", spark=spark)
    answer = store.query(DEMO_PATH, rops=DEMO_ANSWER_ROPS, ops=DEMO_ANSWER_OPS).to_list()
    return answer, version.manifest.loads[-1]["shards"], trees


def test_shards_built_in_parts_answer_as_shards_built_whole(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _load_twice(spark, tmp_path / "whole")
    monkeypatch.setattr(parts, "PART_RECORDS", 100)  # the driver decides a shard's parts
    monkeypatch.setattr(parts, "PARTS_FROM", 500)
    in_parts = _load_twice(spark, tmp_path / "parts")
    assert {shard["parts"] for shard in whole[1].values()} == {1}
    assert all(shard["parts"] >= 5 for shard in in_parts[1].values())  # about 800 records each
    assert in_parts[2] == whole[2]
    assert in_parts[0] == whole[0]
    assert len(whole[0]) > 20
    counted = ("records", "missed_updates", "nodes_created")
    assert [{k: s[k] for k in counted} for s in in_parts[1].values()] == [
        {k: s[k] for k in counted} for s in whole[1].values()
    ]
