"""json-lines files: pyarrow's JSON reader per chunk, line by line only for a chunk it
cannot read (a line that is not JSON, types it cannot unify).

A line that is not UTF-8 text is set aside before pyarrow sees its chunk (pyarrow's
reader does not check it, and would pass the bytes on as text); the chunk's other lines
are still read by pyarrow. JSON strings are never parsed as dates (pyarrow's inferred
timestamps are read again as strings) and numbers keep the text of their line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from loaders.formats.lines import (
    LineChunks,
    is_utf8,
    not_utf8_reason,
    too_long_reason,
    undecodable_lines,
)
from loaders.formats.read_spec import ReadSpec, RecordOutput
from loaders.formats.values import WrittenNumber, as_field, value_text
from treestore.filesystems import input_stream

__all__ = ["read_json", "sample_objects"]

_CHUNK_BYTES = 16 << 20
_SAMPLE_LINES = 1000


def sample_objects(path: str) -> Iterator[dict[str, Any]]:
    """The JSON objects among the first lines of a json-lines file (others skipped)."""
    with input_stream(path) as stream:
        lines = stream.read(1 << 20).split(b"\n")[:_SAMPLE_LINES]
    for line in lines:
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            yield doc


def _json_lines(chunk: bytes, first_line: int) -> tuple[list[bytes], np.ndarray]:
    lines = chunk.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    numbers = np.arange(first_line, first_line + len(lines), dtype=np.int64)
    return lines, numbers


def _json_chunk(
    spec: ReadSpec, out: RecordOutput, chunk: bytes, first_line: int, too_long: dict[int, int]
) -> Iterator[pa.RecordBatch]:
    """The records of a chunk of whole lines, the first numbered ``first_line``; the lines
    ``too_long`` names hold only their first bytes, and are set aside."""
    lines, numbers = _json_lines(chunk, first_line)
    long = [n - first_line for n in too_long if first_line <= n < first_line + len(lines)]
    if long or not is_utf8(chunk):
        bad = {i: not_utf8_reason(byte) for i, byte in undecodable_lines(chunk)}
        bad.update(dict.fromkeys(long, too_long_reason()))
        yield out.bad(
            [
                (int(numbers[i]), reason, lines[i].decode("utf-8", "replace"))
                for i, reason in sorted(bad.items())
                if i < len(lines)
            ]
        )
        keep = np.ones(len(lines), dtype=bool)
        keep[[i for i in bad if i < len(lines)]] = False
        lines, numbers = [line for line, k in zip(lines, keep, strict=True) if k], numbers[keep]
    yield from _json_batch(spec, out, lines, numbers)


def _json_batch(
    spec: ReadSpec, out: RecordOutput, lines: list[bytes], numbers: np.ndarray
) -> Iterator[pa.RecordBatch]:
    import pyarrow.json as pj

    keep = np.array([bool(line.strip()) for line in lines], dtype=bool)
    numbers = numbers[keep]
    data = b"\n".join(line for line, k in zip(lines, keep, strict=True) if k)
    try:
        table = pj.read_json(pa.py_buffer(data), read_options=pj.ReadOptions(use_threads=False))
        undated = {
            name: _undated(table.schema.field(name).type)
            for name in spec.fields
            if name in table.column_names and _has_dates(table.schema.field(name).type)
        }
        if undated:  # pyarrow parsed strings as timestamps: read those fields as written
            table = pj.read_json(
                pa.py_buffer(data),
                read_options=pj.ReadOptions(use_threads=False),
                parse_options=pj.ParseOptions(explicit_schema=pa.schema(undated.items())),
            )
        if table.num_rows != len(numbers):
            raise pa.ArrowInvalid("row count differs from line count")
    except pa.ArrowInvalid:
        yield from _json_slow(
            spec, out, [ln for ln, k in zip(lines, keep, strict=True) if k], numbers
        )
        return
    columns = {}
    for name in spec.fields:
        if name not in table.column_names:
            continue
        column = table.column(name).combine_chunks()
        if pa.types.is_floating(column.type) and name not in spec.list_fields:
            columns[name] = _number_texts(column, name, data, len(numbers))
        else:
            columns[name] = as_field(column, name in spec.list_fields)
    yield out.good(columns, numbers, pa.nulls(len(numbers), pa.string()))


def _has_dates(kind: pa.DataType) -> bool:
    """Whether a JSON column's inferred type holds timestamps (strings pyarrow parsed)."""
    return _undated(kind) != kind


def _undated(kind: pa.DataType) -> pa.DataType:
    """The same type with strings in place of the timestamps pyarrow inferred."""
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        return pa.string()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(_undated(kind.value_type))
    if pa.types.is_struct(kind):
        return pa.struct(
            [
                pa.field(kind.field(i).name, _undated(kind.field(i).type))
                for i in range(kind.num_fields)
            ]
        )
    return kind


_JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"


def _number_texts(column: pa.Array, name: str, data: bytes, rows: int) -> pa.Array:
    """A JSON number column as the text each line wrote (``1.50`` stays ``1.50``, ``1e3``
    stays ``1e3``): the text after the field's key, found by one regular expression over
    the lines, where it reads back as the parsed number; else the number's own text."""
    import pyarrow.compute as pc

    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
    offsets = np.concatenate([[0], ends + 1, [len(data)]]).astype(np.int64)
    lines = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), rows, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)]
    )
    key = json.dumps(name, ensure_ascii=False)
    pattern = re.escape(key) + r"\s*:\s*(?P<number>" + _JSON_NUMBER + ")"
    written = pc.struct_field(pc.extract_regex(lines, pattern), 0).cast(pa.large_string())
    same = pc.fill_null(pc.equal(written.cast(pa.float64()), column.cast(pa.float64())), False)
    return pc.if_else(same, written, column.cast(pa.large_string())).cast(pa.string())


def _json_slow(
    spec: ReadSpec, out: RecordOutput, lines: list[bytes], numbers: np.ndarray
) -> Iterator[pa.RecordBatch]:
    """Line by line: the chunk has a bad line, or types pyarrow cannot unify."""
    docs: list[dict[str, Any]] = []
    good_lines: list[int] = []
    bad: list[tuple[int, str, str]] = []
    for line, number in zip(lines, numbers.tolist(), strict=True):
        try:
            doc = json.loads(line, parse_float=WrittenNumber)
        except UnicodeDecodeError as exc:
            bad.append((number, not_utf8_reason(exc.start + 1), line.decode("utf-8", "replace")))
            continue
        except ValueError as exc:
            bad.append((number, f"not valid JSON ({exc})", line.decode("utf-8", "replace")))
            continue
        if not isinstance(doc, dict):
            bad.append((number, "a JSON line must hold an object", line.decode("utf-8", "replace")))
            continue
        docs.append(doc)
        good_lines.append(number)
    columns = {}
    for name in spec.fields:
        values = [doc.get(name) for doc in docs]
        if name in spec.list_fields:
            listed = [
                None if v is None else [value_text(x) for x in (v if isinstance(v, list) else [v])]
                for v in values
            ]
            columns[name] = pa.array(listed, pa.list_(pa.string()))
        else:
            columns[name] = pa.array([value_text(v) for v in values], pa.string())
    lines_array = np.array(good_lines, dtype=np.int64)
    yield out.good(columns, lines_array, pa.nulls(len(good_lines), pa.string()))
    if bad:
        yield out.bad(bad)


def read_json(spec: ReadSpec, path: str, out: RecordOutput) -> Iterator[pa.RecordBatch]:
    """The records of the json-lines file at ``path``: good ones and set-aside ones."""
    with input_stream(path) as stream:
        chunks = LineChunks(stream, _CHUNK_BYTES)
        for first, chunk in chunks:
            yield from _json_chunk(spec, out, chunk, first, chunks.too_long)
