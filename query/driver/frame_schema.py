"""A query's rows as a Spark DataFrame's: the schema, known before any Spark job, and
each piece of a shard's rows as an Arrow batch of exactly that schema.

The columns are named as :meth:`Rows.column_names` names them. Their types come from the
plan where it knows them: names ``string``, hits and node counts ``bigint``, and every
column's type when the path and all the rops run on columns. A column it cannot type
ahead (an attachment's value, a rop that runs on rows) is typed from the query's first
rows on the driver (at most :data:`PROBE_ROWS` rows of the first :data:`PROBE_SHARDS`
shards): numbers ``double`` (a ``sum`` of whole numbers in the first rows may hold
fractions later; a count or a time is exact in a double up to 2**53), except a column
the path types ``bigint`` whose values stay whole numbers through the rops; anything
else ``string`` (also a column with no value in those rows). A later value that does
not fit stops the read, naming the column and the way out: a schema. A reader given a
schema by its caller (``spark.read.format("treestore").schema("...")``) uses that one
instead, column by column in order (text cast as Arrow casts it: ``"12345"`` reads as
a ``bigint``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from query.driver.plan import QueryPlan
from query.driver.shard_output import shard_rows
from query.ops import Value
from query.ops.columns import Chunk, plain_columns, result_arrow_type
from treestore.errors import OpError
from treestore.storage.tree import ShardTree

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["PROBE_ROWS", "PROBE_SHARDS", "arrow_schema", "batch_of", "frame_schema"]

PROBE_ROWS = 1000
"""The most rows read on the driver to type the columns the plan cannot type ahead."""
PROBE_SHARDS = 2
"""The most shards those rows are read from."""
_TYPE_NAMES = {"string": pa.string(), "int64": pa.int64()}


def frame_schema(plan: QueryPlan, trees: Iterable[ShardTree]) -> StructType:
    """The DataFrame schema of ``plan``'s rows (see the module's docstring); ``trees``
    are the shards' trees in shard order, read only when a column needs its first rows."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    if plan.labels is None:
        raise OpError(
            "this query's columns cannot be named before it runs (an op such as pivot "
            "makes them from the data): give the DataFrame reader a schema, e.g. "
            '.schema("c0 string, c1 bigint")'
        )
    names = list(plan.labels)
    types = _planned_types(plan, names)
    unknown = [i for i, kind in enumerate(types) if kind is None]
    if unknown:
        whole = {i for i in unknown if plan.types.get(names[i]) == "int64"}
        found = _probed_types(plan, trees, unknown, whole)
        types = [found.get(i, pa.string()) if t is None else t for i, t in enumerate(types)]
    return StructType(
        [
            StructField(name, from_arrow_type(kind), nullable=True)
            for name, kind in zip(names, types, strict=True)
        ]
    )


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects of a Python data source's batches for ``schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _planned_types(plan: QueryPlan, names: list[str]) -> list[pa.DataType | None]:
    """Each column's Arrow type as the plan knows it (``None``: not known ahead)."""
    if plan.piece_types is not None:
        return [
            result_arrow_type(kind)
            for kind in itertools.islice(
                itertools.chain(plan.piece_types, itertools.repeat("null")), len(names)
            )
        ]
    if plan.rops.pipeline:
        return [None] * len(names)
    return [_TYPE_NAMES.get(plan.types.get(name, "")) for name in names]


def _probed_types(
    plan: QueryPlan, trees: Iterable[ShardTree], columns: list[int], whole: set[int]
) -> dict[int, pa.DataType]:
    """The types of ``columns`` as the query's first rows show them (a column without a
    value in those rows is absent); numbers are ``double``, but ``bigint`` in the columns
    of ``whole`` (typed so by the path) while they hold only whole numbers."""
    kinds: dict[int, set[type]] = {i: set() for i in columns}
    left = PROBE_ROWS
    for tree in itertools.islice(trees, PROBE_SHARDS):
        for row in itertools.islice(shard_rows(tree, plan.path, plan.rops.pipeline), left):
            left -= 1
            for i in columns:
                if i < len(row) and row[i] is not None:
                    kinds[i].add(type(row[i]))
        if left <= 0:
            break
    found = {}
    for i, seen in kinds.items():
        if not seen:
            continue
        if seen <= {int} and i in whole:
            found[i] = pa.int64()
        elif seen <= {int, float}:
            found[i] = pa.float64()
        else:
            found[i] = pa.string()
    return found


def batch_of(piece: Chunk | list[Any], schema: pa.Schema) -> pa.RecordBatch:
    """One piece of a shard's output (column chunks, maybe coded, or a list of rows) as a
    batch of ``schema``: text columns take numbers as text; a number column refuses a
    value that is not one, naming the column and what to do."""
    if isinstance(piece, list):
        width = max((len(row) for row in piece), default=0)
        _check_width(width, schema)
        columns = [
            _typed([row[i] if i < len(row) else None for row in piece], schema.field(i))
            for i in range(len(schema))
        ]
        return pa.RecordBatch.from_arrays(columns, schema=schema)
    count, given = piece
    _check_width(len(given), schema)
    plain = plain_columns(given)
    columns = []
    for i, target in enumerate(schema):
        if i >= len(plain):
            columns.append(pa.nulls(count, target.type))
        elif plain[i].type == target.type:
            columns.append(plain[i])
        else:
            columns.append(_cast(plain[i], target))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _check_width(width: int, schema: pa.Schema) -> None:
    if width > len(schema):
        raise OpError(
            f"the query's rows have {width} columns and the DataFrame's schema {len(schema)}: "
            "give the reader a schema with a column for each"
        )


def _typed(values: Sequence[Value], target: pa.Field) -> pa.Array:
    """Python values as a column of ``target``'s type."""
    kind = target.type
    if pa.types.is_string(kind):
        return pa.array([None if v is None else str(v) for v in values], kind)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        whole = pa.types.is_integer(kind)
        bad = next((v for v in values if not _fits(v, whole)), None)
        if bad is None:
            try:
                return pa.array([int(v) if whole and v is not None else v for v in values], kind)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                bad = str(exc)  # too big for the column's type
        raise _refusal(target, bad)
    natural = pa.array([None if v is None else str(v) for v in values], pa.string())
    return _cast(natural, target)


def _fits(value: Value, whole: bool) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not whole or float(value).is_integer()


def _cast(column: pa.Array, target: pa.Field) -> pa.Array:
    try:
        return column.cast(target.type)
    except (pa.ArrowException, ValueError) as exc:
        bad = next(
            (v for v in column.to_pylist() if v is not None and not _castable(v, target.type)),
            str(exc),
        )
        raise _refusal(target, bad) from exc


def _castable(value: object, kind: pa.DataType) -> bool:
    try:
        pa.array([value]).cast(kind)
    except (pa.ArrowException, ValueError):
        return False
    return True


def _refusal(target: pa.Field, value: object) -> OpError:
    return OpError(
        f"column {target.name!r} is typed {target.type} in the DataFrame's schema but holds "
        f"{value!r} (a type read from the first rows, or given): give the reader a schema "
        f'that fits, e.g. .schema("... {target.name} string ...")'
    )
