"""Input values as text: what every reader turns its columns into.

Values are text as written: csv/tsv cells as they stand, JSON strings never parsed as
dates and JSON numbers with the text of their line (``1.50``, ``1e3``); a field is a
list of texts when the source holds lists there (JSON arrays, Parquet lists).
"""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import pyarrow as pa

__all__ = ["WrittenNumber", "as_field", "decoded", "time_of_day_text", "value_text"]


class WrittenNumber(float):
    """A JSON number that keeps the text it was written as (``1.50``, ``1e3``)."""

    written: str

    def __new__(cls, text: str) -> WrittenNumber:
        number = super().__new__(cls, text)
        number.written = text
        return number


def value_text(value: Any) -> str | None:
    """A value as the text Spark's cast to string gives (JSON for nested values); a JSON
    number as it was written."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, WrittenNumber):
        return value.written
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:  # shown in local time, as Spark's session shows it
            value = value.astimezone().replace(tzinfo=None)
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return text + f".{value.microsecond:06d}".rstrip("0") if value.microsecond else text
    if isinstance(value, datetime.date | datetime.time | decimal.Decimal):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def time_of_day_text(column: pa.Array) -> pa.Array:
    """Times of day (an Arrow ``time`` array) as text: ``09:30:00``, ``09:30:00.5``."""
    import pyarrow.compute as pc

    text = column.cast(pa.time64("ns")).cast(pa.string())
    text = pc.replace_substring_regex(text, r"\.0+$", "")
    return pc.replace_substring_regex(text, r"(\.[0-9]*[1-9])0+$", r"\1")


def as_field(column: pa.ChunkedArray | pa.Array, is_list: bool) -> pa.Array:
    """An input column as text (or a list of texts)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = column.type
    if is_list and (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        inner = kind.value_type
        if pa.types.is_string(inner) or pa.types.is_large_string(inner):
            return column.cast(pa.list_(pa.string()))
        if pa.types.is_integer(inner) or pa.types.is_floating(inner) or pa.types.is_boolean(inner):
            return column.cast(pa.list_(pa.string()))
        values = [None if v is None else [value_text(x) for x in v] for v in column.to_pylist()]
        return pa.array(values, pa.list_(pa.string()))
    if is_list:  # a scalar where the source usually has lists: a list of one
        texts = as_field(column, False)
        return pa.array(
            [None if v is None else [v] for v in texts.to_pylist()], pa.list_(pa.string())
        )
    if pa.types.is_string(kind):
        return column
    if pa.types.is_large_string(kind) or pa.types.is_null(kind):
        return column.cast(pa.string())
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        return column.cast(pa.string())
    if pa.types.is_time(kind):
        return time_of_day_text(column)
    return pa.array([value_text(v) for v in column.to_pylist()], pa.string())


def decoded(column: pa.Array, name: str, reasons: list[str | None]) -> pa.Array:
    """Binary cells as UTF-8 text; a cell that is not UTF-8 becomes null and rejects its row."""
    try:
        return column.cast(pa.string())
    except pa.ArrowInvalid:
        values = column.to_pylist()
        texts: list[str | None] = []
        for i, value in enumerate(values):
            try:
                texts.append(None if value is None else value.decode("utf-8"))
            except UnicodeDecodeError as exc:
                texts.append(None)
                if reasons[i] is None:
                    reasons[i] = f"field {name!r} is not UTF-8 text (byte {exc.start + 1})"
        return pa.array(texts, pa.string())
