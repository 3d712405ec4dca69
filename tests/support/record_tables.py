"""Record tables as a shard task hands them to tree building, made from plain rows.

Tree tests of more than one module (the compiled kernels' identity tests, the parts
tests) build their input the same way: one column per field the builder reads, the
element filters as booleans, ``ATTRIBUTE_IDS`` as a list of strings, the rest strings.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from loaders.tree.builder import TreeBuilder

__all__ = ["record_table"]


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
