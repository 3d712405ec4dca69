"""Column helpers shared by the sweep's plans: times as numbers, valid intervals, Arrow types."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = ["arrow_type", "interval_bounds", "summed_values", "time_as_long"]

# The range plan's generalised rows: id, time as a number, role (EVENT, START, END), its
# rank at equal times, the interval's value, and the packed (id, time, rank) sort key;
# an interval's end time on its one row (before it makes a start row and an end row).
ID, TIME, ROLE, KIND, VALUE, KEY = "__id", "__time", "__role", "__kind", "__value", "__key"
END_TIME = "__end"


def time_as_long(frame: DataFrame, column: str) -> Column:
    """``column`` as a number: microseconds for timestamps, days for dates, else long or double."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, IntegralType, TimestampNTZType, TimestampType

    data_type = frame.schema[column].dataType
    col = F.col(f"`{column}`")
    if isinstance(data_type, TimestampType | TimestampNTZType):
        return F.unix_micros(col.cast("timestamp"))
    if isinstance(data_type, DateType):
        return F.unix_date(col)
    if isinstance(data_type, IntegralType):
        return col.cast("long")
    return col.cast("double")


def interval_bounds(
    intervals: DataFrame, columns: dict[str, str], closed: str
) -> tuple[Column, Column, Column]:
    """The start and end as numbers, and whether the interval can cover anything."""
    from pyspark.sql import functions as F

    start = time_as_long(intervals, columns["start"])
    end = time_as_long(intervals, columns["end"])
    valid = F.col(f"`{columns['id']}`").isNotNull() & start.isNotNull() & end.isNotNull()
    return start, end, valid & ((start <= end) if closed == "both" else (start < end))


def arrow_type(data_type: DataType, frame: DataFrame) -> pa.DataType:
    """The Arrow type of ``data_type`` between Spark and Python (session time zone)."""
    from pyspark.sql.pandas.types import to_arrow_type

    zone = frame.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    return to_arrow_type(data_type, timezone=zone)


def summed_values(aggregation: str, values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The intervals' values as numpy for a vectorized sweep: nulls add 0; ``count``
    reads none of them (they may be of any type)."""
    if aggregation == "count":
        return np.zeros(len(values))
    return pc.fill_null(values, 0).to_numpy(zero_copy_only=False)
