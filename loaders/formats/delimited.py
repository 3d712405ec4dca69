"""csv and tsv files, read with pyarrow's streaming CSV reader.

A row with the wrong number of cells and a line that is not UTF-8 text are set aside
with their physical line; the other rows load. pyarrow decodes a bad row's text before
it hands it over, so a line that is not UTF-8 must never reach its parser: one scan of
the file (blank lines and undecodable ones, at memory speed) comes first, and when it
found such lines the parser reads the file through a stream that leaves them out.
"""

from __future__ import annotations

import csv as python_csv
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from loaders.formats.lines import (
    BLOCK_BYTES,
    FirstLine,
    LineChunks,
    LineScan,
    StreamWithoutLines,
    first_bad_byte,
    first_line,
    not_utf8_reason,
    physical,
    scan_lines,
    too_long_reason,
)
from loaders.formats.quotes import ends_inside, quoted_spans
from loaders.formats.read_spec import ReadSpec, RecordOutput, UnreadableInput
from loaders.formats.values import as_field, decoded
from treestore.filesystems import input_stream

__all__ = ["header_names", "read_delimited"]

_CR = "\udc0d"
"""Stands for a carriage return inside a line while Python's csv module splits it (no
``surrogateescape`` decoding gives it: its escapes are U+DC80-U+DCFF)."""


def _parse_options(fmt: str, **options: Any) -> Any:
    import pyarrow.csv as csv

    return csv.ParseOptions(
        delimiter="\t" if fmt == "tsv" else ",",
        quote_char=False if fmt == "tsv" else '"',
        **options,
    )


def header_names(first: FirstLine, fmt: str, header: bool = True) -> list[str]:
    """The column names of a delimited file's first line (``f0, f1, ...`` without a
    header); a header that is not UTF-8 text, or a first line the parser cannot split
    (an unclosed quote), raises :class:`UnreadableInput` saying its line and byte offset."""
    import pyarrow.csv as csv

    if header:
        try:
            first.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnreadableInput(
                f"its header, line {first.number}, is not UTF-8 text "
                f"(byte offset {first.offset + exc.start})"
            ) from None
    # the parser's first row: it also ends a row at a lone CR (and skips empty rows)
    row = next((part for part in first.data.rstrip(b"\n").split(b"\r") if part), b"")
    if fmt == "csv" and ends_inside(first.data.rstrip(b"\n")):
        which = "its header, line" if header else "line"
        raise UnreadableInput(
            f"{which} {first.number}, at byte offset {first.offset}: {_OPEN_HEADER}"
        )
    try:
        peek = csv.read_csv(
            pa.py_buffer(row + b"\n"),
            read_options=csv.ReadOptions(use_threads=False, autogenerate_column_names=not header),
            parse_options=_parse_options(fmt),
            convert_options=csv.ConvertOptions(check_utf8=False),
        )
    except pa.ArrowInvalid as exc:  # an unclosed quote
        raise UnreadableInput(
            f"line {first.number}, at byte offset {first.offset}: {str(exc).splitlines()[0]}"
        ) from None
    return list(peek.schema.names)


_OPEN_HEADER = "a quoted value does not end on its line"


def _physical_rows(
    rows: list[tuple[int, str, str]], skipped: np.ndarray
) -> list[tuple[int, str, str]]:
    numbers = physical(np.array([r[0] for r in rows], dtype=np.int64), skipped).tolist()
    return [(n, *r[1:]) for n, r in zip(numbers, rows, strict=True)]


def _cells(raw: bytes, fmt: str) -> list[str]:
    """The cells of one line as the CSV parser splits them; a byte that is not UTF-8
    kept as an escape (``surrogateescape``)."""
    text = raw.decode("utf-8", "surrogateescape").removesuffix("\r")
    if fmt == "tsv":
        return text.split("\t")
    # Python's reader ends a row at a carriage return: hidden while it splits the line
    cells = next(python_csv.reader([text.replace("\r", _CR)]), [])
    return [cell.replace(_CR, "\r") for cell in cells]


def _left_out_records(
    spec: ReadSpec,
    out: RecordOutput,
    rows: list[tuple[int, bytes]],
    expected: int,
    positions: dict[str, int],
    aside: dict[int, str],
) -> Iterator[pa.RecordBatch]:
    """The lines left out of the parser's stream, read one by one: a line ``aside`` names
    is set aside for its reason; of the lines that are not UTF-8 text, one with the wrong
    number of cells, or a field the job reads that is not text, is set aside, and one whose
    bad bytes are in fields the job does not read is a record."""
    numbers: list[int] = []
    values: dict[str, list[str]] = {name: [] for name in positions}
    bad: list[tuple[int, str, str]] = []
    for number, raw in rows:
        shown = raw.decode("utf-8", "replace").removesuffix("\r")
        if number in aside:
            bad.append((number, aside[number], shown))
            continue
        try:
            cells = _cells(raw, spec.format)
        except python_csv.Error:  # a cell past the csv module's size limit: cannot split
            line_byte = first_bad_byte(raw.decode("utf-8", "surrogateescape"))
            bad.append((number, not_utf8_reason(line_byte or 1), shown))
            continue
        if len(cells) != expected:
            bad.append((number, f"expected {expected} columns, found {len(cells)}", shown))
            continue
        reason = None
        for name, index in positions.items():
            byte = first_bad_byte(cells[index])
            if byte is not None:
                reason = f"field {name!r} is not UTF-8 text (byte {byte})"
                break
        if reason is not None:
            bad.append((number, reason, shown))
            continue
        numbers.append(number)
        for name, index in positions.items():
            values[name].append(cells[index])
    if numbers:
        columns = {}
        for name, texts in values.items():
            column = pa.array(texts, pa.string())
            columns[name] = as_field(column, True) if name in spec.list_fields else column
        lines = np.array(numbers, dtype=np.int64)
        yield out.good(columns, lines, pa.nulls(len(numbers), pa.string()))
    if bad:
        yield out.bad(bad)


def _set_aside_lines(path: str, spec: ReadSpec, scan: LineScan) -> dict[int, str]:
    """The lines set aside before the parser reads the file, and why: lines too long to
    hold, and csv quoted values that run past the end of their line (see
    :mod:`loaders.formats.quotes`). The header is never set aside: a header whose quoted
    value runs on, or that is too long, makes the file unreadable."""
    aside = dict.fromkeys(scan.too_long.tolist(), too_long_reason())
    starts = scan.open_quotes
    if spec.header and len(starts):
        header = first_line(path)
        if header is not None and header.number == starts[0]:
            raise UnreadableInput(
                f"its header, line {header.number}, at byte offset {header.offset}: {_OPEN_HEADER}"
            )
    if len(starts):
        with input_stream(path) as stream:
            aside.update(quoted_spans(LineChunks(stream), starts, scan.blanks))
    return aside


def _only_set_aside(
    path: str, out: RecordOutput, aside: dict[int, str]
) -> Iterator[pa.RecordBatch]:
    """The records of a file whose every line is blank or set aside."""
    if not aside:
        return
    with input_stream(path) as stream:
        source = StreamWithoutLines(stream, np.array(sorted(aside), dtype=np.int64))
        source.read()
        found = source.take()
    yield out.bad(
        [(n, aside[n], raw.decode("utf-8", "replace").removesuffix("\r")) for n, raw in found]
    )


def read_delimited(spec: ReadSpec, path: str, out: RecordOutput) -> Iterator[pa.RecordBatch]:
    """The records of the csv/tsv file at ``path``: good ones and set-aside ones."""
    import pyarrow.csv as csv

    invalid: dict[int, tuple[str, str]] = {}

    def on_invalid(row: Any) -> str:
        number = row.number if row.number is not None else -1
        reason = f"expected {row.expected_columns} columns, found {row.actual_columns}"
        invalid[number] = (reason, row.text)
        return "skip"

    names = list(spec.columns) or None
    first = None
    if names:
        file_names = names
    elif spec.header:  # the names come from the first line that is not blank
        first = first_line(path)
        if first is None:
            return  # blank lines only
        file_names = header_names(first, spec.format, True)
    scan = scan_lines(path, quoted=spec.format == "csv")
    aside = _set_aside_lines(path, spec, scan)
    if not names and not spec.header:  # the column count: the first line not set aside
        first = first_line(path, skip=aside)
        if first is None:  # blank lines, and lines set aside
            yield from _only_set_aside(path, out, aside)
            return
        file_names = header_names(first, spec.format, False)
    undecodable = scan.undecodable
    if spec.header and len(undecodable):  # the header is not a record: never left out
        first = first or first_line(path)
        undecodable = undecodable[undecodable != (first.number if first else 0)]
    left_out = np.union1d(undecodable, np.array(sorted(aside), dtype=np.int64))
    read_options = csv.ReadOptions(
        use_threads=False,
        # a row must fit in a block: one longer than the usual block gets a larger one
        block_size=BLOCK_BYTES if scan.longest <= BLOCK_BYTES else scan.longest + BLOCK_BYTES,
        column_names=names or (None if spec.header else file_names),
        skip_rows=1 if names and spec.header else 0,
    )
    parse_options = _parse_options(
        spec.format, ignore_empty_lines=True, invalid_row_handler=on_invalid
    )
    # Arrow's names for a file without a header are f0, f1, ...; Spark's are _c0, _c1, ...
    ours = [f"_c{i}" for i in range(len(file_names))] if not names and not spec.header else None
    positions = {o: i for i, o in enumerate(ours or file_names) if o in spec.fields}
    present = {o: file_names[i] for o, i in positions.items()}
    # no field the job reads: still one column, as bytes (an empty list means every
    # column, each typed by pyarrow's inference, which fails on a stray byte)
    kept = list(present.values()) or file_names[:1]
    convert = csv.ConvertOptions(
        check_utf8=False, include_columns=kept, column_types=dict.fromkeys(kept, pa.binary())
    )
    skipped = np.union1d(scan.blanks, left_out)
    with input_stream(path) as stream:
        source = StreamWithoutLines(stream, left_out) if len(left_out) else None
        try:
            reader = csv.open_csv(
                source if source is not None else stream,
                read_options=read_options,
                parse_options=parse_options,
                convert_options=convert,
            )
        except pa.ArrowInvalid as exc:
            if "Empty CSV" not in str(exc):
                raise
            reader = None  # a header and no records (or only lines that are not text)
        next_line = 2 if spec.header else 1
        for batch in reader or ():
            size = batch.num_rows
            pending = sorted(n for n in invalid if n >= next_line)
            window = np.arange(next_line, next_line + size + len(pending), dtype=np.int64)
            lines = window[~np.isin(window, pending)][:size]
            reasons: list[str | None] = [None] * size
            columns = {}
            for name, file_name in present.items():
                raw = decoded(batch.column(file_name), name, reasons)
                columns[name] = as_field(raw, True) if name in spec.list_fields else raw
            if size:
                next_line = int(lines[-1]) + 1
            bad_rows = [(n, *invalid.pop(n)) for n in sorted(invalid) if n < next_line]
            yield out.good(columns, physical(lines, skipped), pa.array(reasons, pa.string()))
            if bad_rows:
                yield out.bad(_physical_rows(bad_rows, skipped))
            if source is not None and source.found:
                found = source.take()
                yield from _left_out_records(spec, out, found, len(file_names), positions, aside)
        if invalid:
            yield out.bad(_physical_rows([(n, *invalid.pop(n)) for n in sorted(invalid)], skipped))
        if source is not None:
            source.read()  # to the end: every line left out is read
            found = source.take()
            yield from _left_out_records(spec, out, found, len(file_names), positions, aside)
