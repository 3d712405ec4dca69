"""The file readers without Spark: exact line numbers, bad rows, odd files."""

from __future__ import annotations

import random
from pathlib import Path

from loaders.load.readers import LINE, REJECT, ReadPlan, read_files


def _rows(plan: ReadPlan, path: Path) -> list[tuple[int, str | None, str | None]]:
    found = []
    for batch in read_files(plan, [(0, str(path))]):
        for row in batch.to_pylist():
            found.append((row[LINE], row[plan.fields[0]], row[REJECT]))
    return sorted(found)


def test_lines_are_physical_with_blank_lines_anywhere(tmp_path: Path) -> None:
    rng = random.Random(1)
    path = tmp_path / "a.csv"
    plan = ReadPlan("csv", True, (), ("H1",))
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
        assert _rows(plan, path) == expected, path.read_text()


def test_header_only_blank_and_long_rows(tmp_path: Path) -> None:
    plan = ReadPlan("csv", True, (), ("A",))
    path = tmp_path / "a.csv"
    path.write_text("A,B\n")
    assert _rows(plan, path) == []
    path.write_text("\n\n")
    assert _rows(plan, path) == []
    path.write_text("A,B\n" + "x," + "y" * (2 << 20) + "\n1,2\n")  # a 2 MB row
    assert _rows(plan, path) == [(2, "x", None), (3, "1", None)]
    headerless = ReadPlan("tsv", False, (), ("_c1",))
    path.write_text("\na\tb\n")
    assert _rows(headerless, path) == [(2, "b", None)]
