"""Printing rows: tsv, csv, json and an aligned table.

* ``tsv``: columns split by tabs; a null prints as nothing; a tab, newline or
  backslash inside a value prints as ``\\t``, ``\\n`` or ``\\\\``.
* ``csv``: RFC 4180 quoting (Python's csv module); a null prints as nothing.
* ``json``: one valid JSON document, an array of row arrays; null is ``null``.
* ``table``: aligned columns (reads every row before printing the first).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from query.ops import Value

__all__ = ["FORMATS", "write_rows"]

FORMATS = ("tsv", "csv", "json", "table")

_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _text(value: Value) -> str:
    return "" if value is None else str(value)


def _tsv(rows: Iterable[Sequence[Value]], out: TextIO) -> int:
    count = 0
    for row in rows:
        out.write("\t".join(_text(v).translate(_TSV_ESCAPES) for v in row) + "\n")
        count += 1
    return count


def _csv(rows: Iterable[Sequence[Value]], out: TextIO) -> int:
    writer = csv.writer(out, lineterminator="\n")
    count = 0
    for row in rows:
        writer.writerow([_text(v) for v in row])
        count += 1
    return count


def _json(rows: Iterable[Sequence[Value]], out: TextIO) -> int:
    count = 0
    out.write("[")
    for row in rows:
        out.write(("," if count else "") + "\n" + json.dumps(list(row), ensure_ascii=False))
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count


def _table_lines(rows: list[Sequence[Value]]) -> Iterator[str]:
    width = max((len(r) for r in rows), default=0)
    cells = [[_text(r[i]) if i < len(r) else "" for i in range(width)] for r in rows]
    sizes = [max((len(c[i]) for c in cells), default=0) for i in range(width)]
    numeric = [all(isinstance(r[i], int | float) for r in rows if i < len(r)) for i in range(width)]
    for row in cells:
        parts = [
            cell.rjust(sizes[i]) if numeric[i] else cell.ljust(sizes[i])
            for i, cell in enumerate(row)
        ]
        yield "  ".join(parts).rstrip()


def _table(rows: Iterable[Sequence[Value]], out: TextIO) -> int:
    buffered = list(rows)
    for line in _table_lines(buffered):
        out.write(line + "\n")
    return len(buffered)


_WRITERS = {"tsv": _tsv, "csv": _csv, "json": _json, "table": _table}


def write_rows(rows: Iterable[Sequence[Value]], out: TextIO, fmt: str = "tsv") -> int:
    """Write ``rows`` to ``out`` in format ``fmt``; return the number of rows written."""
    try:
        writer = _WRITERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}") from None
    return writer(rows, out)
