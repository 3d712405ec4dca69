"""Output formats: a header row of column names by default, json rows as objects."""

from __future__ import annotations

import io

import pytest

from shell.output.formats import write_rows

ROWS = [("a", 1, "x"), ("bb", 22)]


def _written(fmt: str, rows: list[tuple[object, ...]], **options: object) -> str:
    out = io.StringIO()
    write_rows(rows, out, fmt, **options)  # type: ignore[arg-type]
    return out.getvalue()


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("tsv", "name\thits\tc2\na\t1\tx\nbb\t22\n"),
        ("csv", "name,hits,c2\na,1,x\nbb,22\n"),
        ("table", "name  hits  c2\na        1  x\nbb      22\n"),
        ("jsonl", '{"name": "a", "hits": 1, "c2": "x"}\n{"name": "bb", "hits": 22}\n'),
        ("json", '[\n{"name": "a", "hits": 1, "c2": "x"},\n{"name": "bb", "hits": 22}\n]\n'),
    ],
)
def test_a_header_names_the_columns(fmt: str, expected: str) -> None:
    assert _written(fmt, ROWS, columns=["name", "hits"]) == expected


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("tsv", "a\t1\tx\nbb\t22\n"),
        ("csv", "a,1,x\nbb,22\n"),
        ("table", "a    1  x\nbb  22\n"),
        ("jsonl", '["a", 1, "x"]\n["bb", 22]\n'),
        ("json", '[\n["a", 1, "x"],\n["bb", 22]\n]\n'),
    ],
)
def test_no_header(fmt: str, expected: str) -> None:
    assert _written(fmt, ROWS, header=False, columns=["name", "hits"]) == expected


def test_an_empty_result_prints_its_header_and_unnamed_columns_are_numbered() -> None:
    assert _written("tsv", [], columns=["name", "hits"]) == "name\thits\n"
    assert _written("table", [], columns=["uid"]) == "uid\n"
    assert _written("json", [], columns=["uid"]) == "[]\n"
    assert _written("csv", [("a", 1)]) == "c0,c1\na,1\n"
    out = io.StringIO()
    assert write_rows(ROWS, out, "tsv", columns=["name"]) == 2  # rows, not the header
