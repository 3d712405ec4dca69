"""Bytes that are not text in csv, tsv, json and Parquet inputs: the lines are set aside
with their line, the good lines load, and a file that cannot be read at all is named
with where in it (the readers without Spark).

The random files tried are the Hypothesis profile's examples (100 in ``dev``: a second).
"""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaders.formats import delimited, json_lines
from loaders.formats.readers import LINE, REJECT, TEXT, ReadSpec, read_files
from treestore.errors import LoadError

RANDOM = random.Random(4).randbytes(3000)
"""Random bytes, as a damaged or mistaken input holds: many lines, most not UTF-8."""


def _read(spec: ReadSpec, path: Path) -> list[dict[str, Any]]:
    rows = [row for batch in read_files(spec, [(0, str(path))]) for row in batch.to_pylist()]
    return sorted(rows, key=lambda row: row[LINE])


def _good(rows: list[dict[str, Any]], field: str) -> list[tuple[int, str]]:
    return [(row[LINE], row[field]) for row in rows if row[REJECT] is None]


def _lines(data: bytes) -> int:
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
def test_random_bytes_after_good_rows_are_set_aside_line_by_line(
    fmt: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    sep = "\t" if fmt == "tsv" else ","
    data = f"K{sep}V\nk1{sep}v1\n".encode() + RANDOM + f"\nk2{sep}v2\n".encode()
    path = tmp_path / f"a.{fmt}"
    path.write_bytes(data)
    rows = _read(ReadSpec(fmt, True, (), ("K", "V")), path)
    last = _lines(data)
    assert _good(rows, "K") == [(2, "k1"), (last, "k2")]
    bad = [row for row in rows if row[REJECT] is not None]
    assert [row[LINE] for row in bad] == list(range(3, last))  # each line of bytes, once
    assert all(row[TEXT] is not None for row in bad)
    assert any("not UTF-8" in row[REJECT] or "columns, found" in row[REJECT] for row in bad)
    assert capfd.readouterr().err == ""  # no "Exception ignored in: ... on_invalid"


def test_bad_bytes_in_a_field_the_job_does_not_read_keep_the_record(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(b"K,V,W\na,1,x\nb,2,\xff\xfe\nc,\xff,y\nd,\xc3\n")
    rows = _read(ReadSpec("csv", True, (), ("K", "V")), path)
    assert _good(rows, "V") == [(2, "1"), (3, "2")]
    assert [(row[LINE], row[REJECT]) for row in rows if row[REJECT]] == [
        (4, "field 'V' is not UTF-8 text (byte 1)"),
        (5, "expected 3 columns, found 2"),
    ]


def test_a_long_line_that_is_not_text_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"  # one cell past the csv module's limit (128 KiB)
    path.write_bytes(b"K,V\na,b\nx," + b"y" * 300_000 + b"\xff\nc,d\n")
    rows = _read(ReadSpec("csv", True, (), ("K", "V")), path)
    assert _good(rows, "K") == [(2, "a"), (4, "c")]
    assert [(row[LINE], row[REJECT]) for row in rows if row[REJECT]] == [
        (3, "not UTF-8 text (byte 300003)")
    ]


def test_any_other_failure_while_reading_names_the_file_and_the_last_line_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def failing(column: Any, name: str, reasons: list[str | None]) -> Any:
        calls.append(name)
        if len(calls) > 1:
            raise RuntimeError("out of something")
        return column.cast(pa.string())

    monkeypatch.setattr(delimited, "BLOCK_BYTES", 1024)  # several batches
    monkeypatch.setattr(delimited, "decoded", failing)
    path = tmp_path / "a.tsv"
    path.write_text("K\tV\n" + "".join(f"k{i}\tv\n" for i in range(1000)))
    with pytest.raises(LoadError) as caught:
        _read(ReadSpec("tsv", True, (), ("K",)), path)
    last = int(str(caught.value).split("after line ")[1].split(":")[0])
    assert str(caught.value) == (
        f"reading input file {path} failed after line {last}: RuntimeError: out of something"
    )
    assert 2 < last < 1000


def test_a_header_that_is_not_text_names_the_file_its_line_and_byte_offset(
    tmp_path: Path,
) -> None:
    path = tmp_path / "random.tsv"
    path.write_bytes(b"\n" + RANDOM)
    with pytest.raises(LoadError) as caught:
        _read(ReadSpec("tsv", True, (), ("K",)), path)
    with pytest.raises(UnicodeDecodeError) as header:
        RANDOM.split(b"\n")[0].decode()
    assert str(caught.value) == (
        f"input file {path} cannot be read as tsv (its header, line 2, is not UTF-8 text "
        f"(byte offset {1 + header.value.start})); fix or remove it, then load again"
    )


def test_random_bytes_without_a_header_are_records_or_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "a.tsv"
    path.write_bytes(RANDOM)
    rows = _read(ReadSpec("tsv", False, (), ("_c0",)), path)
    assert [row[LINE] for row in rows] == list(range(1, _lines(RANDOM) + 1))


def test_a_json_line_that_is_not_utf8_is_set_aside_and_the_rest_read_by_pyarrow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_slow_path(*_: object) -> None:
        raise AssertionError("the chunk was read line by line")

    monkeypatch.setattr(json_lines, "_json_slow", no_slow_path)
    path = tmp_path / "a.json"
    path.write_bytes(b'{"K": "a"}\n{"K": "b\xff"}\n{"K": "c"}\n')  # pyarrow does not check
    rows = _read(ReadSpec("json", False, (), ("K",)), path)
    assert _good(rows, "K") == [(1, "a"), (3, "c")]
    assert [(row[LINE], row[REJECT]) for row in rows if row[REJECT]] == [
        (2, "not UTF-8 text (byte 9)")
    ]


def test_a_clean_file_never_takes_the_slow_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("a slow path was taken")

    monkeypatch.setattr(delimited, "StreamWithoutLines", refuse)
    monkeypatch.setattr(delimited, "_left_out_records", refuse)
    monkeypatch.setattr(json_lines, "_json_slow", refuse)
    (tmp_path / "a.csv").write_text("K,V\n" + "".join(f"k{i},é{i}\n" for i in range(1000)))
    (tmp_path / "a.json").write_text(
        "".join(json.dumps({"K": f"é{i}"}) + "\n" for i in range(1000))
    )
    assert len(_read(ReadSpec("csv", True, (), ("K",)), tmp_path / "a.csv")) == 1000
    assert len(_read(ReadSpec("json", False, (), ("K",)), tmp_path / "a.json")) == 1000


def test_parquet_garbage_and_parquet_text_that_is_not_utf8(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(RANDOM)
    with pytest.raises(LoadError, match=rf"^input file {garbage} cannot be read as parquet \("):
        _read(ReadSpec("parquet", False, (), ("K",)), garbage)
    data, offsets = b"okbad\xffz", np.array([0, 2, 6, 7], dtype=np.int32)
    text = pa.StringArray.from_buffers(3, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data))
    latin = tmp_path / "latin.parquet"
    pq.write_table(pa.table({"K": text, "V": ["1", "2", "3"]}), latin)  # written unchecked
    rows = _read(ReadSpec("parquet", False, (), ("K", "V")), latin)
    assert [(row[LINE], row["K"], row["V"], row[REJECT]) for row in rows] == [
        (1, "ok", "1", None),
        (2, None, "2", "field 'K' is not UTF-8 text (byte 4)"),
        (3, "z", "3", None),
    ]


_PIECES = [b"a", b"b", b",", b"\t", b'"', b"\n", b"\r", b"\xff", b"\xc3", b"\xa9", b" ", b"{"]


@settings(
    deadline=timedelta(seconds=20),  # a hang guard, not a timing assertion
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    fmt=st.sampled_from(["csv", "tsv", "json"]),
    header=st.booleans(),
    head=st.sampled_from([b"", b"K,V\n", b"K\tV\n", b'{"K": "a"}\n']),
    body=st.one_of(st.binary(max_size=400), st.lists(st.sampled_from(_PIECES)).map(b"".join)),
)
def test_any_bytes_read_as_records_or_the_file_is_named(
    fmt: str, header: bool, head: bytes, body: bytes, tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = head + body
    path = tmp_path_factory.mktemp("fuzz") / f"a.{fmt}"
    path.write_bytes(data)
    fields = ("K", "V") if header or fmt == "json" else ("_c0", "_c1")
    try:
        rows = _read(ReadSpec(fmt, header, (), fields), path)
    except LoadError as exc:
        said = str(exc)
        assert said.startswith(f"input file {path} cannot be read as {fmt} ("), said
        assert "line " in said and "byte offset " in said, said
        return
    lines = [row[LINE] for row in rows]
    assert len(lines) == len(set(lines)), lines
    if b"\r" not in data.replace(b"\r\n", b""):  # pyarrow also ends a row at a lone CR
        assert all(1 <= line <= _lines(data) for line in lines), lines


def test_a_file_without_the_jobs_fields_reads_its_records_whatever_their_bytes(
    tmp_path: Path,
) -> None:
    """The fuzz found it: a csv whose header holds none of the job's fields had every column
    typed by pyarrow's inference, and a stray NUL refused the whole file."""
    path = tmp_path / "a.csv"
    path.write_bytes(b'K\tV\n""\n\x80\n\x00')  # one column, named "K\tV"
    rows = _read(ReadSpec("csv", True, (), ("K", "V")), path)
    assert [row[LINE] for row in rows] == [2, 3, 4]
    # bytes that are not UTF-8 in a field no one reads do not reject the record
    assert [row[REJECT] for row in rows] == [None, None, None]
