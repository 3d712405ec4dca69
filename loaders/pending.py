"""Pending records: update-only records that arrived before their node, kept for later loads.

A ``create: false`` element with ``pending: {"loads": N}`` does not drop a record
whose node does not exist (Hydra's behaviour, and ours without ``pending``): the
record's path, from that element on, is kept with the shard's tree and retried at
the end of each of the next N loads, after every source of the load was applied (so
a node any source of a later load creates is found). A retried record whose node now
exists goes on from that element through the rest of the tree, as if it had arrived
after its node; one still without its node after N loads expires and is counted.
This is a watermark counted in loads, in the spirit of a streaming join's state,
which waits for the other side until its watermark passes.

Per shard, the waiting records are one Arrow IPC file in the store, named in the
shard's state (``ShardState.pending``) so that it is published, kept and collected
with the version that holds it. Each row is a record's fields (those the tree
reads) and where its path stopped: the element, the parent node (id and key), the
name it looked for, its weight and the loads it has left.
"""

from __future__ import annotations

import uuid

import pyarrow as pa

from treestore.pagestore import PageStore

__all__ = [
    "ELEMENT",
    "LOADS_LEFT",
    "NAME",
    "PARENT",
    "PARENT_NAME",
    "PARENT_OF",
    "WEIGHT",
    "read_pending",
    "write_pending",
]

ELEMENT = "__pending_element"  # the element's place in the job file (``ElementSpec.where``)
PARENT = "__pending_parent"  # the parent node's id
PARENT_OF = "__pending_parent_of"  # the parent node's key: its own parent's id ...
PARENT_NAME = "__pending_parent_name"  # ... and its name
NAME = "__pending_name"  # the child name the element looked for
WEIGHT = "__pending_weight"  # how many identical records the row stands for
LOADS_LEFT = "__pending_loads"  # how many more loads retry it


def read_pending(pages: PageStore, name: str) -> pa.Table:
    """The pending records stored in ``name``."""
    return pa.ipc.open_stream(pa.BufferReader(pages.read(name))).read_all()


def write_pending(pages: PageStore, shard: int, tables: list[pa.Table]) -> tuple[str | None, int]:
    """Store the shard's waiting records (tables of one schema) as a new file; return its
    name (``None`` when nothing waits) and the number of rows."""
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return None, 0
    table = pa.concat_tables(tables, promote_options="permissive")
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    name = f"trees/shard-{shard:04d}/{uuid.uuid4().hex[:12]}-pending.arrow"
    pages.write(name, sink.getvalue().to_pybytes())
    return name, table.num_rows
