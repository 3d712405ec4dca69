"""Printing rows: tsv, csv, json, jsonl and an aligned table, with a header row.

* ``tsv``: columns split by tabs; a null prints as nothing; a tab, newline or
  backslash inside a value prints as ``\\t``, ``\\n`` or ``\\\\``.
* ``csv``: RFC 4180 quoting (Python's csv module); a null prints as nothing.
* ``json``: one valid JSON document, an array of rows; null is ``null``.
* ``jsonl``: one JSON row per line.
* ``table``: aligned columns (reads every row before printing the first); real
  numbers rounded to 6 decimals, for display only.

With ``header`` (the default), tsv, csv and table print the column names first,
and json/jsonl rows are objects keyed by column name; without it, json/jsonl rows
are arrays. Names come from ``columns`` (a query's :meth:`Rows.column_names`: the
path's ``name``, ``hits``, ``nodes``, attachment or ``{label}``); a column past them
is ``cN``, its 0-based number.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from query.ops import Value

__all__ = ["FORMATS", "column_names", "write_rows"]

FORMATS = ("tsv", "csv", "json", "jsonl", "table")

_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _text(value: Value) -> str:
    return "" if value is None else str(value)


def _shown(value: Value) -> str:
    """A cell as the table shows it: a real number rounded to 6 decimals (the other
    formats print it whole), very large or small ones in exponent form."""
    if isinstance(value, float) and math.isfinite(value) and value != int(value):
        if abs(value) >= 1e15 or abs(value) < 1e-4:
            return f"{value:.6g}"
        return f"{value:.6f}".rstrip("0").rstrip(".")
    return _text(value)


def column_names(columns: Sequence[str] | None, width: int) -> list[str]:
    """The names of ``width`` columns (at least as many as ``columns`` gives): ``columns``,
    then ``cN`` for each column past them."""
    names = list(columns or ())
    return names + [f"c{i}" for i in range(len(names), width)]


class _Header:
    """The header row of a streamed format: the names, once the first row's width is known."""

    def __init__(self, columns: Sequence[str] | None, header: bool) -> None:
        self.columns = columns
        self.header = header

    def split(
        self, rows: Iterable[Sequence[Value]]
    ) -> tuple[list[str] | None, Iterator[Sequence[Value]]]:
        """The header row (``None`` when not asked for, or with no column to name) and the
        rows: the names cover the given columns and the first row's width."""
        iterator = iter(rows)
        if not self.header:
            return None, iterator
        first = list(itertools.islice(iterator, 1))
        names = column_names(self.columns, len(first[0]) if first else 0)
        return names or None, itertools.chain(first, iterator)


def _tsv_line(row: Sequence[Value]) -> str:
    return "\t".join(_text(v).translate(_TSV_ESCAPES) for v in row) + "\n"


def _tsv(rows: Iterable[Sequence[Value]], out: TextIO, head: _Header) -> int:
    names, body = head.split(rows)
    if names is not None:
        out.write(_tsv_line(names))
    count = 0
    for row in body:
        out.write(_tsv_line(row))
        count += 1
    return count


def _csv(rows: Iterable[Sequence[Value]], out: TextIO, head: _Header) -> int:
    writer = csv.writer(out, lineterminator="\n")
    names, body = head.split(rows)
    if names is not None:
        writer.writerow(names)
    count = 0
    for row in body:
        writer.writerow([_text(v) for v in row])
        count += 1
    return count


def _records(rows: Iterable[Sequence[Value]], head: _Header) -> Iterator[object]:
    """Each row as JSON data: an object keyed by column name (with a header), else a list."""
    names = list(head.columns or ())
    for row in rows:
        if not head.header:
            yield list(row)
            continue
        if len(row) > len(names):
            names = column_names(names, len(row))
        yield dict(zip(names, row, strict=False))


def _json(rows: Iterable[Sequence[Value]], out: TextIO, head: _Header) -> int:
    count = 0
    out.write("[")
    for record in _records(rows, head):
        out.write(("," if count else "") + "\n" + json.dumps(record, ensure_ascii=False))
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count


def _jsonl(rows: Iterable[Sequence[Value]], out: TextIO, head: _Header) -> int:
    count = 0
    for record in _records(rows, head):
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    return count


def _table_lines(rows: list[Sequence[Value]], names: list[str] | None = None) -> Iterator[str]:
    width = max((len(r) for r in rows), default=0)
    if names is not None:
        names = column_names(names, width)
        width = len(names)
    cells = [[_shown(r[i]) if i < len(r) else "" for i in range(width)] for r in rows]
    if names is not None:
        cells.insert(0, names)
    sizes = [max((len(c[i]) for c in cells), default=0) for i in range(width)]
    numeric = [
        any(i < len(r) for r in rows)
        and all(isinstance(r[i], int | float) for r in rows if i < len(r))
        for i in range(width)
    ]
    if not width:
        return
    for row in cells:
        parts = [
            cell.rjust(sizes[i]) if numeric[i] else cell.ljust(sizes[i])
            for i, cell in enumerate(row)
        ]
        yield "  ".join(parts).rstrip()


def _table(rows: Iterable[Sequence[Value]], out: TextIO, head: _Header) -> int:
    buffered = list(rows)
    names = list(head.columns or ()) if head.header else None
    for line in _table_lines(buffered, names):
        out.write(line + "\n")
    return len(buffered)


_WRITERS = {"tsv": _tsv, "csv": _csv, "json": _json, "jsonl": _jsonl, "table": _table}


def write_rows(
    rows: Iterable[Sequence[Value]],
    out: TextIO,
    fmt: str = "tsv",
    header: bool = True,
    columns: Sequence[str] | None = None,
) -> int:
    """Write ``rows`` to ``out`` in format ``fmt``; return the number of rows written.

    ``header``: tsv, csv and table start with a row of column names, json and jsonl
    rows are objects keyed by them (without it: no names, json rows are arrays).
    ``columns``: the names (a query's ``Rows.column_names()``); columns past them, or
    all when ``None``, are named ``cN``. An empty result prints just the header.
    """
    try:
        writer = _WRITERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}") from None
    return writer(rows, out, _Header(columns, header))
