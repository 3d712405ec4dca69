"""The compiled kernels build the same trees, byte for byte, as the numpy code they replace.

The oracle is the numpy code itself: with :data:`treestore.native.NATIVE_FROM` above any
array's size, every hash, key-index probe and grouping of tree building runs in numpy,
as it did before the kernels; with it at 1, every one runs compiled. Both arms load the
same records into fresh page stores (the run names' random tag fixed), and every file
they write must be equal, with the shards' states.
"""

from __future__ import annotations

import ast
import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.tree.builder import TreeBuilder
from loaders.tree.shard_load import ShardLoad
from shell.demo import DEMO_JOB
from tests.support.record_tables import job_builder, record_rows, record_table
from treestore import native
from treestore.storage.pagestore import MemoryPageStore

ORACLE = 1 << 62  # no array is this big: numpy everywhere
COMPILED = 1  # every array through the kernels


@contextmanager
def _arm(native_from: int) -> Iterator[None]:
    """Kernels from ``native_from`` values on; the names of runs and pending files with
    tags counted from 0 (numba's first compile draws uuids of its own)."""
    tags = (mock.Mock(hex=f"{n:012x}{0:020x}") for n in range(1 << 20))
    counted = SimpleNamespace(uuid4=lambda: next(tags))
    with (
        mock.patch.object(native, "NATIVE_FROM", native_from),
        mock.patch("treestore.storage.tree.uuid", counted),
        mock.patch("loaders.tree.pending.uuid", counted),
    ):
        yield


def _load(
    builder: TreeBuilder,
    batches: list[pa.Table],
    native_from: int,
    memtable_limit: int | None = None,
    loads: int = 1,
    parts: int = 1,
) -> tuple[dict[str, bytes], list[str]]:
    """Every file a shard's loads write, and each load's state, with the kernels from
    ``native_from`` values on (each load applies all ``batches`` again), the records built
    in ``parts`` parts (see :mod:`loaders.tree.parts`)."""
    pages = MemoryPageStore()
    states, state = [], None
    with _arm(native_from):
        for _ in range(loads):
            load = ShardLoad(builder, pages, 3, state, parts=parts)
            if memtable_limit is not None:
                load.tree.memtable_limit = memtable_limit
            for table in batches:
                load.apply(table)
            state = load.finish()
            states.append(json.dumps(state.to_json(), sort_keys=True))
    return dict(pages.blobs), states


def _seed_rows(builder: TreeBuilder, attributes: int, mappings: int, seed: int) -> list[pa.Table]:
    """The seed's shape (as bench/load.py makes it): attribute rows with 1-5 ids, mapping
    rows of which a third have a UID no attribute row has; in batches of 5,000."""
    rng = np.random.default_rng(seed)
    uids = max(1, int(attributes * 0.6))
    attribute, mapping = builder.filter_columns.values()
    rows: list[dict[str, Any]] = []
    for uid, count in zip(
        rng.integers(0, uids, attributes).tolist(),
        rng.integers(1, 6, attributes).tolist(),
        strict=True,
    ):
        ids = [str(i) for i in rng.integers(1, 1000, count).tolist()]
        rows.append({"UID": f"u{uid}", "ATTRIBUTE_IDS": ids, attribute: True, mapping: False})
    known = rng.random(mappings) < 2 / 3
    for k, uid, puid in zip(
        known.tolist(),
        rng.integers(0, uids, mappings).tolist(),
        rng.integers(0, max(1, mappings // 50), mappings).tolist(),
        strict=True,
    ):
        rows.append(
            {"UID": f"u{uid if k else uids + uid}", "PUID": f"p{puid}", attribute: False,
             mapping: True}
        )  # fmt: skip
    return [record_table(builder, rows[i : i + 5000]) for i in range(0, len(rows), 5000)]


@pytest.mark.parametrize("parts", [1, 4])
def test_the_seeds_load_writes_the_same_bytes_compiled_and_in_numpy(parts: int) -> None:
    builder = job_builder(DEMO_JOB)
    batches = _seed_rows(builder, 6000, 30000, seed=7)
    # a memtable of 4,000 entries: flushes, runs looked up, compactions
    oracle = _load(builder, batches, ORACLE, memtable_limit=4000, loads=2, parts=parts)
    compiled = _load(builder, batches, COMPILED, memtable_limit=4000, loads=2, parts=parts)
    assert len(oracle[0]) > 4  # runs and their indexes were written
    assert oracle[1] == compiled[1]
    assert oracle[0].keys() == compiled[0].keys()
    assert all(oracle[0][name] == compiled[0][name] for name in oracle[0])


_NAMES = st.sampled_from(["u1", "u2", "ü3", "", None, "a" * 70, "x" * 9])


@settings(max_examples=min(60, settings().max_examples), deadline=None)  # each loads twice
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ATTR", "MAPPING"]),
            _NAMES,
            st.lists(st.sampled_from(["1", "2", "3", "", None, "é" * 12]), max_size=4),
            st.sampled_from(["p", "q", "r" * 20, None]),
        ),
        max_size=120,
    ),
    st.integers(1, 40),
    st.booleans(),
    st.booleans(),
    st.sampled_from([1, 3]),
)
def test_random_records_build_the_same_bytes_compiled_and_in_numpy(
    records: list[tuple[Any, ...]], batch_size: int, once: bool, pending: bool, parts: int
) -> None:
    job = copy.deepcopy(DEMO_JOB)
    attribute, mapping = job["tree"]["root"][1]["list"]
    if once:
        attribute[2]["once"] = True
    if pending:
        mapping[0]["pending"] = {"loads": 2}
    builder = job_builder(job)
    rows = record_rows(builder, records)
    batches = [
        record_table(builder, rows[i : i + batch_size]) for i in range(0, len(rows), batch_size)
    ]
    oracle = _load(builder, batches, ORACLE, memtable_limit=8, loads=2, parts=parts)
    compiled = _load(builder, batches, COMPILED, memtable_limit=8, loads=2, parts=parts)
    assert oracle[1] == compiled[1]
    assert oracle[0] == compiled[0]


def test_a_load_needs_no_kernel_but_those_the_warm_up_compiled() -> None:
    """``native.warm()`` (which ``make`` runs) compiles each kernel for the very types a
    load gives it: a load after it compiles nothing more (one signature each)."""
    code = """
from tests.loaders.tree import test_native_identity as t
from treestore import native

def signatures():
    return sorted((name, len(f.signatures)) for name, f in vars(native.kernels()).items()
                  if hasattr(f, "signatures") and not name.startswith("_"))

native.warm()
warmed = signatures()
builder = t.job_builder(t.DEMO_JOB)
t._load(builder, t._seed_rows(builder, 300, 1500, seed=3), t.COMPILED, memtable_limit=400, loads=2)
print([warmed, signatures()])
"""
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    warmed, after_load = (dict(pairs) for pairs in ast.literal_eval(done.stdout.strip()))
    assert len(warmed) >= 8 and set(warmed.values()) == {1}, warmed
    assert after_load == warmed
