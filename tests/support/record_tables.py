"""Record tables as a shard task hands them to tree building, made from plain rows.

Tree tests of more than one module (the compiled kernels' identity tests, the parts
tests, the shard load's tests) build their input the same way: a tree builder from a job
as a dict, rows from (source, UID, attribute ids, PUID) records of the seed's shape, and
one column per field the builder reads, the element filters as booleans,
``ATTRIBUTE_IDS`` as a list of strings, the rest strings.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from loaders.job.model import _Validator
from loaders.job.text import JobText
from loaders.tree.builder import TreeBuilder

__all__ = ["job_builder", "record_rows", "record_table"]


def job_builder(job: dict[str, Any]) -> TreeBuilder:
    """The tree builder of ``job`` (a job file's content), checked as a job file is."""
    return TreeBuilder(_Validator(JobText("job.json", "", job), Path(".")).job_spec().tree)


def record_rows(builder: TreeBuilder, records: Iterable[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Rows of the seed's two sources from ``(source, uid, ids, puid)`` records (source
    ``"ATTR"`` or ``"MAPPING"``), each marked for its source's element filter."""
    attribute, mapping = list(builder.filter_columns.values())
    return [
        {"UID": uid, "ATTRIBUTE_IDS": ids, "PUID": puid,
         attribute: source == "ATTR", mapping: source == "MAPPING"}
        for source, uid, ids, puid in records
    ]  # fmt: skip


def record_table(builder: TreeBuilder, rows: list[dict[str, Any]]) -> pa.Table:
    """The rows as the table of the builder's fields (a missing field is null)."""
    columns = {}
    for name in builder.fields:
        values = [row.get(name) for row in rows]
        if name.startswith("__element_filter"):
            columns[name] = pa.array(values, pa.bool_())
        elif name == "ATTRIBUTE_IDS":
            columns[name] = pa.array(values, pa.list_(pa.string()))
        else:
            columns[name] = pa.array(values, pa.string())
    return pa.table(columns)
