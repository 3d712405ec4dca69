"""Damaged and odd input files (the readers without Spark): a csv quote that runs past
the end of its line, compressed and Parquet files that cannot be read (truncated,
garbage), and lines longer than a read block or than the most a line may hold.

Each one is set aside with its line, or the file is refused in one line naming it; the
records around it load, at their own line numbers, never a value that swallowed them.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loaders.formats import lines as lines_module
from loaders.formats.lines import SHOWN_BYTES
from loaders.formats.quotes import ends_inside, open_quote_lines, quoted_spans
from loaders.formats.readers import (
    LINE,
    REJECT,
    TEXT,
    ReadSpec,
    read_files,
    sample_field_names,
    sample_list_fields,
)
from treestore.errors import LoadError

NEVER_CLOSES = "a quoted value does not end on its line (its quote never closes)"


def _read(spec: ReadSpec, path: Path) -> list[dict[str, Any]]:
    rows = [row for batch in read_files(spec, [(0, str(path))]) for row in batch.to_pylist()]
    return sorted(rows, key=lambda row: row[LINE])


def _outcome(rows: list[dict[str, Any]], field: str) -> list[tuple[int, str | None]]:
    """Each row as (line, its field's value) or (line, why it was set aside)."""
    return [(row[LINE], row[REJECT] or row[field]) for row in rows]


# -- a csv quote that runs past the end of its line ----------------------------------------


def test_a_quote_that_never_closes_sets_aside_its_line_and_the_rest_loads(
    tmp_path: Path,
) -> None:
    """The issue's file: the records after the quote used to disappear into its value."""
    path = tmp_path / "a.csv"
    path.write_text('K,V\nco1,vo1\nco2,"vo2\nco3,vo3\nco4,vo4\n')
    rows = _read(ReadSpec("csv", True, (), ("K", "V")), path)
    assert _outcome(rows, "V") == [(2, "vo1"), (3, NEVER_CLOSES), (4, "vo3"), (5, "vo4")]
    assert rows[1][TEXT] == 'co2,"vo2'


def test_a_value_spanning_lines_sets_aside_each_line_it_spans(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(
        "K,V\n"
        'k1,"line one\n'  # 2: a value over lines 2-3, as RFC 4180 allows
        'line two",x\n'
        "k2,v2\n"
        'k3,"a\n'  # 5: over lines 5-7, with a blank line inside
        "\n"
        'b",c,"d\n'  # 7: closes one value and opens the next: the span goes on
        'e"\n'
        'k4,"q""uoted, ok"\n'
        "k5,v5\r\n"
    )
    rows = _read(ReadSpec("csv", True, (), ("K", "V")), path)
    assert _outcome(rows, "V") == [
        (2, "a quoted value runs past the end of its line, to line 3 (a value may not span lines)"),
        (3, "inside the quoted value that line 2 starts"),
        (4, "v2"),
        (5, "a quoted value runs past the end of its line, to line 8 (a value may not span lines)"),
        (7, "inside the quoted value that line 5 starts"),
        (8, "inside the quoted value that line 5 starts"),
        (9, 'q"uoted, ok'),
        (10, "v5"),
    ]
    assert [row[TEXT] for row in rows if row[REJECT]][:2] == ['k1,"line one', 'line two",x']


def test_a_file_without_a_header_counts_its_columns_from_a_line_it_keeps(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.csv"
    path.write_text('"a,b,c\nk1,v1\n')
    rows = _read(ReadSpec("csv", False, (), ("_c0", "_c1")), path)
    assert _outcome(rows, "_c1") == [(1, NEVER_CLOSES), (2, "v1")]
    path.write_text('"a,b\n"c,d\n')  # nothing but lines set aside
    assert _outcome(_read(ReadSpec("csv", False, (), ("_c0",)), path), "_c0") == [
        (1, "a quoted value runs past the end of its line, to line 2 (a value may not span lines)"),
        (2, "inside the quoted value that line 1 starts"),
    ]


@pytest.mark.parametrize("columns", [(), ("K", "V")], ids=["header", "header and columns"])
def test_a_header_whose_quote_runs_on_refuses_the_file_naming_its_line(
    tmp_path: Path, columns: tuple[str, ...]
) -> None:
    path = tmp_path / "a.csv"
    path.write_text('\nK,"V\nk,v\n')
    with pytest.raises(LoadError) as caught:
        _read(ReadSpec("csv", True, columns, ("K", "V")), path)
    assert str(caught.value) == (
        f"input file {path} cannot be read as csv (its header, line 2, at byte offset 1: "
        "a quoted value does not end on its line); fix or remove it, then load again"
    )


def test_tsv_has_no_quoting(tmp_path: Path) -> None:
    path = tmp_path / "a.tsv"
    path.write_text('K\tV\nk1\t"v1\nk2\tv2"\n')
    rows = _read(ReadSpec("tsv", True, (), ("K", "V")), path)
    assert _outcome(rows, "V") == [(2, '"v1'), (3, 'v2"')]


def test_a_value_spans_chunks_of_lines() -> None:
    chunks = [(1, b'K,V\nk1,"a\n'), (3, b"b\n"), (4, b'c",d\nk2,"e\n'), (6, b"f\n")]
    starts = open_quote_lines(b"".join(chunk for _, chunk in chunks)) + 1
    assert quoted_spans(chunks, starts, np.zeros(0, dtype=np.int64)) == {
        2: "a quoted value runs past the end of its line, to line 4 (a value may not span lines)",
        3: "inside the quoted value that line 2 starts",
        4: "inside the quoted value that line 2 starts",
        5: NEVER_CLOSES,
    }


def _arrow_ends_inside(line: bytes) -> bool:
    """pyarrow's own answer: the line, then a marker line; the quote ran on if the marker
    ended up inside a cell (or a row's text) together with a newline."""
    texts: list[str] = []
    names = [f"c{i}" for i in range(64)]

    def invalid(row: Any) -> str:
        texts.append(row.text)
        return "skip"

    table = pcsv.read_csv(
        pa.py_buffer(line + b"\n\x01Z\n"),
        read_options=pcsv.ReadOptions(column_names=names),
        parse_options=pcsv.ParseOptions(invalid_row_handler=invalid),
        convert_options=pcsv.ConvertOptions(column_types=dict.fromkeys(names, pa.string())),
    )
    cells = [cell for column in table.columns for cell in column.to_pylist() if cell]
    return any("\x01Z" in text and "\n" in text for text in cells + texts)


_CSV_TEXT = [b'"', b'"', b",", b"a", b"\r", b" "]
_CSV_LINES = st.lists(st.lists(st.sampled_from(_CSV_TEXT), max_size=16).map(b"".join), max_size=6)


@given(lines=_CSV_LINES.filter(bool))
def test_where_a_quote_runs_on_is_where_pyarrows_parser_runs_on(lines: list[bytes]) -> None:
    expected = [i for i, line in enumerate(lines) if _arrow_ends_inside(line)]
    assert [i for i, line in enumerate(lines) if ends_inside(line)] == expected
    assert open_quote_lines(b"\n".join(lines)).tolist() == expected


@given(pieces=st.lists(st.lists(st.sampled_from([*_CSV_TEXT, b"\xff"]), max_size=16), max_size=12))
def test_every_line_of_a_csv_is_a_record_or_set_aside_once(
    pieces: list[list[bytes]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No line disappears into another's value: each line that is not blank comes out once,
    at its own number (a line with a lone carriage return is two rows to the parser)."""
    path = tmp_path_factory.mktemp("csv") / "a.csv"
    lines = [b"".join(line).replace(b"\r", b"") for line in pieces]
    path.write_bytes(b"K,V\n" + b"\n".join(lines))
    numbers = [row[LINE] for row in _read(ReadSpec("csv", True, (), ("K", "V")), path)]
    assert numbers == [i for i, line in enumerate(lines, 2) if line]


# -- files that cannot be read ------------------------------------------------------------


def _records(fmt: str) -> bytes:
    rows = [{"K": f"k{i}", "V": f"value {i}" * 3} for i in range(5000)]
    if fmt == "json":
        return b"".join(json.dumps(row).encode() + b"\n" for row in rows)
    sep = "\t" if fmt == "tsv" else ","
    return ("K" + sep + "V\n" + "".join(f"{r['K']}{sep}{r['V']}\n" for r in rows)).encode()


def _compressed(fmt: str, codec: str) -> Callable[[Path], bytes]:
    def make(tmp_path: Path) -> bytes:
        whole = tmp_path / "whole"
        with pa.CompressedOutputStream(str(whole), codec) as out:
            out.write(_records(fmt))
        return whole.read_bytes()

    return make


def _parquet(tmp_path: Path) -> bytes:
    whole = tmp_path / "whole.parquet"
    pq.write_table(pa.table({"K": ["a", "b"], "V": [["x"], ["y", "z"]]}), whole)
    return whole.read_bytes()


_KINDS = {
    "csv.gz": ("csv", _compressed("csv", "gzip")),
    "tsv.bz2": ("tsv", _compressed("tsv", "bz2")),
    "json.gz": ("json", _compressed("json", "gzip")),
    "json.zst": ("json", _compressed("json", "zstd")),
    "json.bz2": ("json", _compressed("json", "bz2")),
    "parquet": ("parquet", _parquet),
}


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
@pytest.mark.parametrize("suffix", list(_KINDS))
def test_a_file_that_cannot_be_read_is_refused_in_one_line_by_sampling_and_reading(
    tmp_path: Path, suffix: str, damage: str
) -> None:
    """The driver samples a source's first files (field names, list fields) before Spark
    starts: a truncated .json.gz was a traceback there."""
    fmt, make = _KINDS[suffix]
    whole = make(tmp_path)
    path = tmp_path / f"{damage}.{suffix}"
    bad = whole[: len(whole) // 2] if damage == "truncated" else random.Random(7).randbytes(3000)
    path.write_bytes(bad)
    said = re.compile(
        rf"input file {re.escape(str(path))} cannot be read as {fmt} \([^\n]+\); "
        "fix or remove it, then load again"
    )
    spec = ReadSpec(fmt, fmt != "json", (), ("K", "V"))
    for reads in (  # a sample may end before the damage; reading the file never does
        lambda: sample_field_names(fmt, [str(path)]),
        lambda: sample_list_fields(fmt, [str(path)], ["K", "V"]),
        lambda: _read(spec, path),
    ):
        try:
            reads()
        except LoadError as exc:
            assert said.fullmatch(str(exc)), str(exc)
    with pytest.raises(LoadError):
        _read(spec, path)


# -- long lines ---------------------------------------------------------------------------


def _long_file(fmt: str, value: str) -> bytes:
    if fmt == "json":
        lines = [{"K": "k1", "V": "v1"}, {"K": "k2", "V": value}, {"K": "k3", "V": "v3"}]
        return "".join(json.dumps(line) + "\n" for line in lines).encode()
    sep = "\t" if fmt == "tsv" else ","
    return f"K{sep}V\nk1{sep}v1\nk2{sep}{value}\nk3{sep}v3\n".encode()


@pytest.mark.parametrize(
    ("fmt", "size"), [("csv", 50 << 20), ("tsv", 20 << 20), ("json", 20 << 20)]
)
def test_a_value_longer_than_a_read_block_loads(tmp_path: Path, fmt: str, size: int) -> None:
    """The issue's 50 MB value (csv); tsv and json past a block (8 MB) and a read (16 MB)."""
    path = tmp_path / f"a.{fmt}"
    path.write_bytes(_long_file(fmt, "x" * size))
    rows = _read(ReadSpec(fmt, fmt != "json", (), ("K", "V")), path)
    first = 2 if fmt != "json" else 1
    assert [(row[LINE], row["K"], len(row["V"]), row[REJECT]) for row in rows] == [
        (first, "k1", 2, None),
        (first + 1, "k2", size, None),
        (first + 2, "k3", 2, None),
    ]


@pytest.mark.parametrize("fmt", ["csv", "tsv", "json"])
def test_a_line_past_the_most_a_line_may_hold_is_set_aside_with_its_first_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    monkeypatch.setattr(lines_module, "MAX_LINE_BYTES", 256 << 10)
    path = tmp_path / f"a.{fmt}"
    path.write_bytes(_long_file(fmt, "y" * (1 << 20)))
    rows = _read(ReadSpec(fmt, fmt != "json", (), ("K", "V")), path)
    first = 2 if fmt != "json" else 1
    why = (
        "longer than 262,144 bytes, the most one line may hold "
        "(its first 1,024 bytes kept as its text)"
    )
    assert _outcome(rows, "V") == [(first, "v1"), (first + 1, why), (first + 2, "v3")]
    assert len(rows[1][TEXT]) == SHOWN_BYTES


def test_a_first_line_past_the_most_a_line_may_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lines_module, "MAX_LINE_BYTES", 256 << 10)
    path = tmp_path / "a.tsv"
    path.write_bytes(b"k0\t" + b"y" * (1 << 20) + b"\nk1\tv1\n")
    rows = _read(ReadSpec("tsv", False, (), ("_c0", "_c1")), path)  # no header: a record
    assert [(row[LINE], row["_c1"]) for row in rows] == [(1, None), (2, "v1")]
    with pytest.raises(LoadError) as caught:  # a header: the file cannot be read
        _read(ReadSpec("tsv", True, (), ("k0",)), path)
    assert str(caught.value) == (
        f"input file {path} cannot be read as tsv (line 1, at byte offset 0, is longer than "
        "262,144 bytes, the most one line may hold); fix or remove it, then load again"
    )
