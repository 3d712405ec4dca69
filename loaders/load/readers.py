"""Reading input files inside Spark tasks with pyarrow, keeping every record's line number.

Spark's own text readers neither number lines nor report a row with the wrong
number of columns, so each input file is read by one task with pyarrow's
streaming CSV reader (csv, tsv), its JSON reader (json lines, with a line-by-line
fallback that finds the bad lines) or its Parquet reader. Only the fields the
job uses are kept. Each output row carries ``__file`` (the file's number in the
load; its path travels once, not per row), ``__line`` (the physical
line, or the row number in a Parquet file) and ``__reject``: null for a good
record, else why the record was set aside (then ``__text`` holds the raw line).

A file is a local path or a URI (``s3://bucket/in/a.tsv``), opened through
:mod:`treestore.filesystems` in the task: executors read what the driver listed
from the same location, never from a folder only the driver has.

Values are text as written: csv/tsv cells as they stand, JSON strings never parsed as
dates (pyarrow's inferred timestamps are read again as strings) and JSON numbers with
the text of their line (``1.50``, ``1e3``); a field is a list of texts when the source
holds lists there (JSON arrays, Parquet lists), as found by sampling the first files.
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from treestore.errors import LoadError
from treestore.filesystems import input_file, input_stream

__all__ = [
    "FILE_COLUMN",
    "LINE",
    "REJECT",
    "TEXT",
    "ReadPlan",
    "read_files",
    "sample_field_names",
    "sample_list_fields",
    "time_of_day_text",
]

FILE_COLUMN, LINE, REJECT, TEXT = "__file", "__line", "__reject", "__text"
"""Columns of every read row: file number, line number, why rejected, rejected line's text."""
_CSV_BLOCK_BYTES = 8 << 20
_JSON_CHUNK_BYTES = 16 << 20
_SAMPLE_LINES = 1000
_SAMPLE_FILES = 20


@dataclass(frozen=True)
class ReadPlan:
    """How to read one source's files: format, header/columns and the fields to keep."""

    format: str
    header: bool
    columns: tuple[str, ...]
    fields: tuple[str, ...]
    list_fields: frozenset[str] = frozenset()

    def schema(self) -> pa.Schema:
        """The Arrow schema of the rows :func:`read_files` yields."""
        types = [
            pa.list_(pa.string()) if name in self.list_fields else pa.string()
            for name in self.fields
        ]
        return pa.schema(
            [
                *(pa.field(n, t) for n, t in zip(self.fields, types, strict=True)),
                pa.field(FILE_COLUMN, pa.int32()),
                pa.field(LINE, pa.int64()),
                pa.field(REJECT, pa.string()),
                pa.field(TEXT, pa.string()),
            ]
        )

    def spark_schema(self) -> str:
        """The same schema as a Spark DDL string."""
        parts = [
            f"`{n}` {'array<string>' if n in self.list_fields else 'string'}" for n in self.fields
        ]
        parts += [f"{FILE_COLUMN} int", f"{LINE} long", f"{REJECT} string", f"{TEXT} string"]
        return ", ".join(parts)


def sample_list_fields(fmt: str, paths: list[str], fields: Iterable[str]) -> frozenset[str]:
    """Which of ``fields`` hold lists in the first files (JSON: their first lines)."""
    wanted = set(fields)
    found: set[str] = set()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        for path in paths[:_SAMPLE_FILES]:
            try:
                with input_file(path) as source:
                    schema = pq.read_schema(source)
            except (OSError, pa.ArrowException):
                continue  # reading it fails the load with a clear message
            for spec in schema:
                if spec.name in wanted and pa.types.is_list(spec.type) | pa.types.is_large_list(
                    spec.type
                ):
                    found.add(spec.name)
    elif fmt == "json":
        for path in paths[:_SAMPLE_FILES]:
            for doc in _sample_objects(path):
                found |= {k for k, v in doc.items() if k in wanted and isinstance(v, list)}
    return frozenset(found)


def _sample_objects(path: str) -> Iterator[dict[str, Any]]:
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


def _header_names(first: bytes, fmt: str, header: bool = True) -> list[str]:
    """The column names of a delimited file's first line (``f0, f1, ...`` without a header)."""
    import pyarrow.csv as csv

    peek = csv.read_csv(
        pa.py_buffer(first),
        read_options=csv.ReadOptions(use_threads=False, autogenerate_column_names=not header),
        parse_options=csv.ParseOptions(
            delimiter="\t" if fmt == "tsv" else ",", quote_char=False if fmt == "tsv" else '"'
        ),
    )
    return list(peek.schema.names)


def sample_field_names(fmt: str, paths: list[str]) -> tuple[str, ...]:
    """The field names of a source's first files, in order of appearance: the header of
    csv/tsv files, the keys of JSON lines' objects, the columns of Parquet files."""
    names: dict[str, None] = {}
    for path in paths[:_SAMPLE_FILES]:
        if fmt in ("csv", "tsv"):
            first = _first_line(path)
            if first is not None:
                names.update(dict.fromkeys(_header_names(first, fmt)))
        elif fmt == "json":
            for doc in _sample_objects(path):
                names.update(dict.fromkeys(doc))
        else:
            import pyarrow.parquet as pq

            with input_file(path) as source:
                names.update(dict.fromkeys(pq.read_schema(source).names))
    return tuple(names)


class _Number(float):
    """A JSON number that keeps the text it was written as (``1.50``, ``1e3``)."""

    written: str

    def __new__(cls, text: str) -> _Number:
        number = super().__new__(cls, text)
        number.written = text
        return number


def _text(value: Any) -> str | None:
    """A value as the text Spark's cast to string gives (JSON for nested values); a JSON
    number as it was written."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, _Number):
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


def _as_field(column: pa.ChunkedArray | pa.Array, is_list: bool) -> pa.Array:
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
        values = [None if v is None else [_text(x) for x in v] for v in column.to_pylist()]
        return pa.array(values, pa.list_(pa.string()))
    if is_list:  # a scalar where the source usually has lists: a list of one
        texts = _as_field(column, False)
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
    return pa.array([_text(v) for v in column.to_pylist()], pa.string())


class _Output:
    """Builds the output batches of one file."""

    def __init__(self, plan: ReadPlan, number: int) -> None:
        self.plan, self.number = plan, number
        self.schema = plan.schema()

    def good(
        self, columns: dict[str, pa.Array], lines: np.ndarray, rejects: pa.Array
    ) -> pa.RecordBatch:
        size = len(lines)
        arrays = []
        for name, spec in zip(self.plan.fields, self.schema, strict=False):
            found = columns.get(name)
            arrays.append(found if found is not None else pa.nulls(size, spec.type))
        arrays += [
            pa.array(np.full(size, self.number, dtype=np.int32)),
            pa.array(lines, pa.int64()),
            rejects,
            pa.nulls(size, pa.string()),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def bad(self, rows: list[tuple[int, str, str]]) -> pa.RecordBatch:
        """Rows set aside while parsing: (line, reason, raw text)."""
        size = len(rows)
        arrays = [pa.nulls(size, spec.type) for spec in list(self.schema)[: len(self.plan.fields)]]
        arrays += [
            pa.array(np.full(size, self.number, dtype=np.int32)),
            pa.array([r[0] for r in rows], pa.int64()),
            pa.array([r[1] for r in rows], pa.string()),
            pa.array([r[2] for r in rows], pa.string()),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _decoded(column: pa.Array, name: str, reasons: list[str | None]) -> pa.Array:
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


def _blank_lines(path: str) -> np.ndarray:
    """The (1-based) numbers of the empty lines of a text file, found with memchr-speed scans."""
    blanks: list[int] = []
    line, carry = 1, b""
    with input_stream(path) as stream:
        while True:
            block = stream.read(_CSV_BLOCK_BYTES)
            data = carry + block
            cut = data.rfind(b"\n") + 1 if block else len(data)
            chunk, carry = data[:cut], data[cut:]
            found = [0] if chunk.startswith((b"\n", b"\r\n")) else []
            for pattern in (b"\n\n", b"\n\r\n"):
                at = chunk.find(pattern)
                while at >= 0:
                    found.append(at + 1)
                    at = chunk.find(pattern, at + 1)
            counted, seen = 0, 0
            for at in sorted(found):
                counted += chunk.count(b"\n", seen, at)
                seen = at
                blanks.append(line + counted)
            line += chunk.count(b"\n")
            if not block:
                return np.array(blanks, dtype=np.int64)


def _first_line(path: str) -> bytes | None:
    """The first line of a text file that is not blank (None for a file of blank lines)."""
    found = b""
    with input_stream(path) as stream:
        while block := stream.read(1 << 16):
            found += block
            for line in found.split(b"\n")[:-1]:
                if line.strip(b"\r"):
                    return line + b"\n"
            found = found[found.rfind(b"\n") + 1 :]
    return found + b"\n" if found.strip(b"\r") else None


def _physical(numbers: np.ndarray, blanks: np.ndarray) -> np.ndarray:
    """Line numbers that skip empty lines -> physical line numbers (``blanks``: the empty ones)."""
    if not len(blanks):
        return numbers
    shifted = blanks - np.arange(len(blanks))
    return numbers + np.searchsorted(shifted, numbers, side="right")


def _physical_rows(
    rows: list[tuple[int, str, str]], blanks: np.ndarray
) -> list[tuple[int, str, str]]:
    numbers = _physical(np.array([r[0] for r in rows], dtype=np.int64), blanks).tolist()
    return [(n, *r[1:]) for n, r in zip(numbers, rows, strict=True)]


def _read_delimited(plan: ReadPlan, path: str, out: _Output) -> Iterator[pa.RecordBatch]:
    import pyarrow.csv as csv

    invalid: dict[int, tuple[str, str]] = {}

    def on_invalid(row: Any) -> str:
        number = row.number if row.number is not None else -1
        reason = f"expected {row.expected_columns} columns, found {row.actual_columns}"
        invalid[number] = (reason, row.text)
        return "skip"

    names = list(plan.columns) or None
    read_options = csv.ReadOptions(
        use_threads=False,
        block_size=_CSV_BLOCK_BYTES,
        column_names=names,
        skip_rows=1 if names and plan.header else 0,
        autogenerate_column_names=not names and not plan.header,
    )
    parse_options = csv.ParseOptions(
        delimiter="\t" if plan.format == "tsv" else ",",
        quote_char=False if plan.format == "tsv" else '"',
        ignore_empty_lines=True,
        invalid_row_handler=on_invalid,
    )
    if names:
        file_names = names
    else:  # the names (or the column count) come from the first line that is not blank
        first = _first_line(path)
        if first is None:
            return
        file_names = _header_names(first, plan.format, plan.header)
    # Arrow names columns f0, f1, ... when the file has no header; Spark's names are _c0, _c1, ...
    ours = (
        [f"_c{i}" for i in range(len(file_names))] if not names and not plan.header else file_names
    )
    present = {o: f for o, f in zip(ours, file_names, strict=True) if o in plan.fields}
    convert = csv.ConvertOptions(
        check_utf8=False,
        include_columns=list(present.values()),
        column_types={f: pa.binary() for f in present.values()},
    )
    with input_stream(path) as stream:
        try:
            reader = csv.open_csv(
                stream,
                read_options=read_options,
                parse_options=parse_options,
                convert_options=convert,
            )
        except pa.ArrowInvalid as exc:
            if "Empty CSV" in str(exc):
                return  # a header and no records
            raise
        blanks = _blank_lines(path)
        next_line = 2 if plan.header else 1
        for batch in reader:
            size = batch.num_rows
            pending = sorted(n for n in invalid if n >= next_line)
            window = np.arange(next_line, next_line + size + len(pending), dtype=np.int64)
            lines = window[~np.isin(window, pending)][:size]
            reasons: list[str | None] = [None] * size
            columns = {}
            for name, file_name in present.items():
                raw = _decoded(batch.column(file_name), name, reasons)
                columns[name] = _as_field(raw, True) if name in plan.list_fields else raw
            if size:
                next_line = int(lines[-1]) + 1
            bad_rows = [(n, *invalid.pop(n)) for n in sorted(invalid) if n < next_line]
            yield out.good(columns, _physical(lines, blanks), pa.array(reasons, pa.string()))
            if bad_rows:
                yield out.bad(_physical_rows(bad_rows, blanks))
        if invalid:
            yield out.bad(_physical_rows([(n, *invalid.pop(n)) for n in sorted(invalid)], blanks))


def _json_lines(chunk: bytes, first_line: int) -> tuple[list[bytes], np.ndarray]:
    lines = chunk.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    numbers = np.arange(first_line, first_line + len(lines), dtype=np.int64)
    return lines, numbers


def _json_batch(
    plan: ReadPlan, out: _Output, lines: list[bytes], numbers: np.ndarray
) -> Iterator[pa.RecordBatch]:
    import pyarrow.json as pj

    keep = np.array([bool(line.strip()) for line in lines], dtype=bool)
    numbers = numbers[keep]
    data = b"\n".join(line for line, k in zip(lines, keep, strict=True) if k)
    try:
        table = pj.read_json(pa.py_buffer(data), read_options=pj.ReadOptions(use_threads=False))
        undated = {
            name: _undated(table.schema.field(name).type)
            for name in plan.fields
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
            plan, out, [ln for ln, k in zip(lines, keep, strict=True) if k], numbers
        )
        return
    columns = {}
    for name in plan.fields:
        if name not in table.column_names:
            continue
        column = table.column(name).combine_chunks()
        if pa.types.is_floating(column.type) and name not in plan.list_fields:
            columns[name] = _number_texts(column, name, data, len(numbers))
        else:
            columns[name] = _as_field(column, name in plan.list_fields)
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
    plan: ReadPlan, out: _Output, lines: list[bytes], numbers: np.ndarray
) -> Iterator[pa.RecordBatch]:
    """Line by line: the chunk has a bad line, or types pyarrow cannot unify."""
    docs: list[dict[str, Any]] = []
    good_lines: list[int] = []
    bad: list[tuple[int, str, str]] = []
    for line, number in zip(lines, numbers.tolist(), strict=True):
        try:
            doc = json.loads(line, parse_float=_Number)
        except UnicodeDecodeError as exc:
            bad.append(
                (number, f"not UTF-8 text (byte {exc.start + 1})", line.decode("utf-8", "replace"))
            )
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
    for name in plan.fields:
        values = [doc.get(name) for doc in docs]
        if name in plan.list_fields:
            listed = [
                None if v is None else [_text(x) for x in (v if isinstance(v, list) else [v])]
                for v in values
            ]
            columns[name] = pa.array(listed, pa.list_(pa.string()))
        else:
            columns[name] = pa.array([_text(v) for v in values], pa.string())
    lines_array = np.array(good_lines, dtype=np.int64)
    yield out.good(columns, lines_array, pa.nulls(len(good_lines), pa.string()))
    if bad:
        yield out.bad(bad)


def _read_json(plan: ReadPlan, path: str, out: _Output) -> Iterator[pa.RecordBatch]:
    next_line, rest = 1, b""
    with input_stream(path) as stream:
        while True:
            block = stream.read(_JSON_CHUNK_BYTES)
            data = rest + block
            if not block:
                if data:
                    lines, numbers = _json_lines(data, next_line)
                    yield from _json_batch(plan, out, lines, numbers)
                return
            cut = data.rfind(b"\n") + 1
            data, rest = data[:cut], data[cut:]
            if data:
                lines, numbers = _json_lines(data, next_line)
                next_line += len(lines)
                yield from _json_batch(plan, out, lines, numbers)


def _read_parquet(plan: ReadPlan, path: str, out: _Output) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    with input_file(path) as source, pq.ParquetFile(source) as parquet:
        present = [name for name in plan.fields if name in parquet.schema_arrow.names]
        row = 1
        for batch in parquet.iter_batches(batch_size=65536, columns=present):
            columns = {
                name: _as_field(batch.column(name), name in plan.list_fields) for name in present
            }
            lines = np.arange(row, row + batch.num_rows, dtype=np.int64)
            row += batch.num_rows
            yield out.good(columns, lines, pa.nulls(batch.num_rows, pa.string()))


def read_files(plan: ReadPlan, files: Iterable[tuple[int, str]]) -> Iterator[pa.RecordBatch]:
    """Read ``(number, path)`` files by ``plan``; a file that cannot be read at all raises
    :class:`LoadError`."""
    reader = {"csv": _read_delimited, "tsv": _read_delimited, "json": _read_json}.get(
        plan.format, _read_parquet
    )
    for number, path in files:
        out = _Output(plan, number)
        try:
            yield from reader(plan, path, out)
        except (OSError, pa.ArrowException) as exc:
            # a whole file that cannot be read fails the load: skipping it would lose it
            raise LoadError(
                f"input file {path} cannot be read as {plan.format} ({exc}); "
                "fix or remove it, then load again"
            ) from None
