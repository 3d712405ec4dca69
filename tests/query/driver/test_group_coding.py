"""A task's shards coded together: where the driver's first op reads every row first
(``gather``), a ``cross ... list``'s lists of consecutive shards travel in one piece with
one dictionary per column, and give the rows each shard's own pieces give."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from random import Random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import query.driver.shard_output as shard_output
from loaders import load_job, run_load
from query.driver.plan import QueryRequest, plan_query
from query.driver.runner import open_store
from query.driver.shard_output import encoded_shard, encoded_shards, lists_coded_together
from query.driver.transport import COLUMNS, ERROR, decode_piece
from query.ops.columns import plain
from query.ops.cross import ListsOfBlock, list_chunk
from shell.demo import DEMO_ANSWER_ROPS, DEMO_JOB, DEMO_PATH
from treestore.errors import TreestoreError

ANSWER = (DEMO_ANSWER_ROPS, "gather=kJ")


@pytest.fixture(scope="module")
def seed_store(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed's job over 300 UIDs of 1-3 attribute ids, and 2,000 mappings to 40 PUIDs
    (each PUID's UIDs spread over the 8 shards, as in the seed's data)."""
    folder = tmp_path_factory.mktemp("seed-store")
    random = Random(7)
    attributes = ["TIME\tUID\tATTRIBUTE_IDS"] + [
        f"{1000 + n}\tu{n}\t{','.join(str(random.randrange(50)) for _ in range(1 + n % 3))}"
        for n in range(300)
    ]
    mappings = ["TIME\tUID\tPUID"] + [
        f"{5000 + n}\tu{random.randrange(400)}\tp{random.randrange(40)}" for n in range(2000)
    ]
    for name, lines in (("attributes", attributes), ("mapping", mappings)):
        (folder / name).mkdir()
        (folder / name / "part-0.tsv").write_text("\n".join(lines) + "\n")
    (folder / "job.json").write_text(json.dumps(DEMO_JOB))
    run_load(spark, load_job(folder / "job.json"), folder / "store")
    return folder / "store"


def _plan(store: Path, rops: str, ops: str | None) -> Any:
    """The plan as a Spark job runs it (a store this small is walked on the driver)."""
    opened = open_store(store)
    plan = plan_query(
        QueryRequest(DEMO_PATH, rops, ops),
        shards=tuple(opened.store_version.manifest.trees),
        tree_of=opened.tree,
        local_limit=-1,
    )
    assert plan.path_on_columns
    return plan


def _rows(pieces: list[tuple[int, Any]]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for kind, payload in pieces:
        batch = decode_piece(kind, payload)
        columns = [plain(column).to_pylist() for column in batch.columns]
        rows += list(zip(*columns, strict=True))
    return rows


def _grouped(store: Path, plan: Any, **given: Any) -> list[tuple[int, list[tuple[int, Any]]]]:
    version = open_store(store).store_version
    shards = encoded_shards(
        version.pages, version.manifest.trees, plan, plan.shards, version.owner, **given
    )
    return [(shard, list(pieces)) for shard, pieces in shards]


@pytest.mark.parametrize("compress", [False, True])
def test_shards_coded_together_give_each_shards_rows_in_order(
    seed_store: Path, compress: bool
) -> None:
    plan = _plan(seed_store, *ANSWER)
    version = open_store(seed_store).store_version
    alone = [
        piece
        for shard in plan.shards
        for piece in encoded_shard(
            version.pages, version.manifest.trees[shard], plan, shard, version.owner, compress
        )
    ]
    grouped = _grouped(seed_store, plan, compress=compress)
    assert [shard for shard, _ in grouped] == list(plan.shards)
    pieces = [piece for _, shard_pieces in grouped for piece in shard_pieces]
    assert {kind for kind, _ in pieces} == {COLUMNS}
    assert _rows(pieces) == _rows(alone)
    # the demo's lists fit one piece: it goes out as the last shard's, the others send none
    assert [len(shard_pieces) for _, shard_pieces in grouped] == [0] * (len(grouped) - 1) + [1]
    left = decode_piece(*pieces[0]).column(0)
    assert isinstance(left, pa.DictionaryArray)
    dictionary = left.dictionary.to_pylist()
    assert len(dictionary) == len(set(dictionary))  # each value once for all the shards
    assert len(dictionary) < sum(len(decode_piece(*piece).column(0).dictionary) for piece in alone)


def test_a_piece_is_cut_once_it_holds_enough_values(
    seed_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every block of lists makes a piece: a shard whose walk gives two blocks (its first
    64 rows, then the rest) sends two, so no shard's piece grows past the limit."""
    plan = _plan(seed_store, *ANSWER)
    whole = _grouped(seed_store, plan, compress=False)
    monkeypatch.setattr(shard_output, "GROUP_LIST_VALUES", 1)
    cut = _grouped(seed_store, plan, compress=False)
    assert all(pieces for _, pieces in cut)  # every shard sends its own rows
    assert max(len(pieces) for _, pieces in cut) > 1  # and a big one several pieces
    assert _rows([p for _, pieces in cut for p in pieces]) == _rows(
        [p for _, pieces in whole for p in pieces]
    )


def test_an_error_in_a_shard_comes_after_the_rows_held_before_it(seed_store: Path) -> None:
    plan = _plan(seed_store, *ANSWER)
    version = open_store(seed_store).store_version
    states = dict(version.manifest.trees)
    broken = plan.shards[len(plan.shards) // 2]
    states[broken] = dataclasses.replace(states[broken], runs=("no-such-run",))
    shards = encoded_shards(version.pages, states, plan, plan.shards, version.owner, False)
    grouped = [(shard, list(pieces)) for shard, pieces in shards]
    at_broken = grouped[plan.shards.index(broken)][1]
    assert at_broken[-1][0] == ERROR
    with pytest.raises(TreestoreError):
        decode_piece(*at_broken[-1])
    sent = [piece for _, pieces in grouped for piece in pieces if piece[0] == COLUMNS]
    others = [
        piece
        for shard in plan.shards
        if shard != broken
        for piece in encoded_shard(version.pages, states[shard], plan, shard, version.owner, False)
    ]
    # the shards before it were sent once, before its error, and the shards after it too
    assert _rows(sent) == _rows(others)
    assert at_broken[0][0] == COLUMNS and grouped[-1][1][-1][0] == COLUMNS


def test_text_of_both_widths_is_coded_together() -> None:
    narrow = ListsOfBlock(
        pa.array(["p1", "p2"]), np.array([0, 0]), np.array([1, 1]), pa.array(["1"])
    )
    wide = ListsOfBlock(
        pa.array(["p1"], pa.large_string()), np.array([0]), np.array([1]),
        pa.array(["2"], pa.large_string()),
    )  # fmt: skip
    count, (left, lists) = list_chunk([narrow, wide])
    assert count == 3 and left.dictionary.to_pylist() == ["p1", "p2"]
    assert plain(lists).to_pylist() == ["1", "1", "2"]


def test_no_shard_is_read_once_the_driver_stops(seed_store: Path) -> None:
    plan = _plan(seed_store, *ANSWER)
    grouped = _grouped(seed_store, plan, compress=False, stopped=lambda: True)
    assert [pieces for _, pieces in grouped] == [[] for _ in plan.shards]


@pytest.mark.parametrize(
    ("rops", "ops", "together"),
    [
        (DEMO_ANSWER_ROPS, "gather=kJ", True),
        (DEMO_ANSWER_ROPS, None, False),  # rows go out as they come: the first ones early
        (DEMO_ANSWER_ROPS, "limit=3", False),
        ("cross=0,1,2,M,A", "gather=kk", False),  # pairs, not lists
        (DEMO_ANSWER_ROPS + ";gather=kJ", "gather=kJ", False),  # another rop after it
    ],
)
def test_lists_are_coded_together_only_before_an_op_that_reads_every_row(
    seed_store: Path, rops: str, ops: str | None, together: bool
) -> None:
    assert (lists_coded_together(_plan(seed_store, rops, ops)) is not None) is together


def test_the_answer_from_the_spark_job_equals_the_driver_walk(spark: Any, seed_store: Path) -> None:
    handle = open_store(seed_store, spark=spark)
    walked = handle.query(DEMO_PATH, rops=DEMO_ANSWER_ROPS, ops="gather=kJ").to_list()
    assert handle.last_run != "spark" and len(walked) == 40
    handle.local_limit = -1  # every query through Spark: the tasks code their shards together
    in_spark = handle.query(DEMO_PATH, rops=DEMO_ANSWER_ROPS, ops="gather=kJ").to_list()
    assert handle.last_run == "spark"
    assert in_spark == walked
