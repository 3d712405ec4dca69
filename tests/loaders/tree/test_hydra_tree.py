"""Hydra's tree-building tests as vectors (fixtures/hydra_tree/cases.json), without Spark.

Each case describes job elements, loads of records and query paths with the rows
they must give. The runner makes :class:`ElementSpec` s from the elements, applies
each load's records in order as one batch with :class:`TreeBuilder` (weight 1
each), commits, and after the last load runs each expected path with
:func:`run_path`: its rows (as lists) must equal ``rows`` exactly, in order, or
their number must equal ``row_count``. A case marked ``lead`` fails on the
current builder: it is skipped with that reason (the tree builder is the lead's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loaders.job.model import AttachmentSpec, ElementSpec
from loaders.tree.builder import ApplyStats, TreeBuilder
from query import parse_path, run_path
from treestore.storage.pagestore import MemoryPageStore
from treestore.storage.tree import ShardTree

FIXTURE = Path(__file__).parent / "fixtures" / "hydra_tree" / "cases.json"
CASES: list[dict[str, Any]] = json.loads(FIXTURE.read_text())["cases"]


def _element(spec: dict[str, Any], where: str) -> ElementSpec:
    fields = dict(spec)
    fields["where"] = fields.get("where", where)
    fields["filter"] = object() if fields.get("filter") else None  # verdicts come in records
    fields["data"] = tuple(AttachmentSpec(**a) for a in fields.get("data", ()))
    fields["branches"] = tuple(
        tuple(_element(e, f"{where}.{b}.{i}") for i, e in enumerate(branch))
        for b, branch in enumerate(fields.get("branches", ()))
    )
    return ElementSpec(**fields)


def _records(load: Any) -> list[dict[str, Any]]:
    if isinstance(load, list):
        return load
    start, stop = load["numbered"]
    return [{name: str(i) for name in load["fields"]} for i in range(start, stop)]


def _build(case: dict[str, Any]) -> ShardTree:
    elements = [_element(e, str(i)) for i, e in enumerate(case["elements"])]
    builder = TreeBuilder(elements)
    tree = ShardTree(MemoryPageStore())
    for load in case["loads"]:
        records = []
        for values in _records(load):
            record = {k: v for k, v in values.items() if not k.startswith("filter:")}
            for where, column in builder.filter_columns.items():
                record[column] = values[f"filter:{where}"]
            records.append(builder.record(record))
        builder.apply_batch(tree, records, [1] * len(records), ApplyStats())
        tree = ShardTree(tree.pages, tree.commit())
    return tree


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_hydra_tree_vector(case: dict[str, Any]) -> None:
    assert case["source"]
    if "lead" in case:
        pytest.skip(f"lead: {case['lead']}")
    tree = _build(case)
    for expected in case["expect"]:
        rows = [list(row) for row in run_path(tree, parse_path(expected["path"]))]
        if "rows" in expected:
            assert rows == expected["rows"], expected["path"]
        else:
            assert len(rows) == expected["row_count"], expected["path"]
