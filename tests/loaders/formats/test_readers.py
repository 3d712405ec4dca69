"""The file readers without Spark: exact line numbers, bad rows, odd files."""

from __future__ import annotations

import random
from pathlib import Path

from loaders.formats.readers import LINE, REJECT, ReadSpec, read_files


def _rows(spec: ReadSpec, path: Path) -> list[tuple[int, str | None, str | None]]:
    found = []
    for batch in read_files(spec, [(0, str(path))]):
        for row in batch.to_pylist():
            found.append((row[LINE], row[spec.fields[0]], row[REJECT]))
    return sorted(found)


def test_lines_are_physical_with_blank_lines_anywhere(tmp_path: Path) -> None:
    rng = random.Random(1)
    path = tmp_path / "a.csv"
    spec = ReadSpec("csv", True, (), ("H1",))
    for _ in range(150):
        lines, expected = ["" for _ in range(rng.randint(0, 2))] + ["H1,H2"], []
        for i in range(rng.randint(0, 25)):
            kind = rng.random()
            if kind < 0.2:
                lines.append(rng.choice(["", "\r"]))
            elif kind < 0.3:
                lines.append("x,y,z")
                expected.append((len(lines), None, "expected 2 columns, found 3"))
            else:
                lines.append(f"v{i},w")
                expected.append((len(lines), f"v{i}", None))
        path.write_text("\n".join(lines) + rng.choice(["", "\n"]))
        assert _rows(spec, path) == expected, path.read_text()


def test_header_only_blank_and_long_rows(tmp_path: Path) -> None:
    spec = ReadSpec("csv", True, (), ("A",))
    path = tmp_path / "a.csv"
    path.write_text("A,B\n")
    assert _rows(spec, path) == []
    path.write_text("\n\n")
    assert _rows(spec, path) == []
    path.write_text("A,B\n" + "x," + "y" * (2 << 20) + "\n1,2\n")  # a 2 MB row
    assert _rows(spec, path) == [(2, "x", None), (3, "1", None)]
    headerless = ReadSpec("tsv", False, (), ("_c1",))
    path.write_text("\na\tb\n")
    assert _rows(headerless, path) == [(2, "b", None)]


def _json_values(tmp_path: Path, text: str, fields: tuple[str, ...]) -> list[dict[str, object]]:
    path = tmp_path / "a.json"
    path.write_text(text)
    spec = ReadSpec("json", False, (), fields)
    rows = [row for batch in read_files(spec, [(0, str(path))]) for row in batch.to_pylist()]
    return [
        {name: row[name] for name in (*fields, LINE)} for row in sorted(rows, key=lambda r: r[LINE])
    ]


def test_json_dates_and_timestamps_stay_as_written(tmp_path: Path) -> None:
    text = (
        '{"day": "2023-11-14", "at": "2023-11-15T23:30:00+02:00"}\n'
        '{"day": "2023-11-15", "at": "2023-11-16 08:00:00", "tags": ["2023-11-14"]}\n'
    )
    assert _json_values(tmp_path, text, ("day", "at", "tags")) == [
        {"day": "2023-11-14", "at": "2023-11-15T23:30:00+02:00", "tags": None, LINE: 1},
        {"day": "2023-11-15", "at": "2023-11-16 08:00:00", "tags": '["2023-11-14"]', LINE: 2},
    ]


def test_json_numbers_keep_their_text_fast_and_slow_path(tmp_path: Path) -> None:
    good = '{"price": 1.50, "n": 12}\n{"price": 1e3, "o": {"price": 2.0}}\n{"price": 1.0}\n'
    expected = [
        {"price": "1.50", "n": "12", LINE: 1},
        {"price": "1e3", "n": None, LINE: 2},
        {"price": "1.0", "n": None, LINE: 3},
    ]
    assert _json_values(tmp_path, good, ("price", "n")) == expected
    # a bad line sends the chunk through the line-by-line reader: the same texts
    slow = _json_values(tmp_path, good + "not json\n", ("price", "n"))
    assert slow[:3] == expected
    assert slow[3] == {"price": None, "n": None, LINE: 4}
