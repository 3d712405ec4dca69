"""``treestore query --no-header``: the rows alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shell.cli import main


def test_no_header_prints_the_rows_alone(
    demo_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", str(demo_store), "root/+:+hits"]) == 0
    with_header = capsys.readouterr().out.splitlines()
    assert with_header[0] == "name\thits"
    assert main(["query", str(demo_store), "root/+:+hits", "--no-header"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert (
        sorted(rows) == ["11111\t1", "12345\t3", "22222\t1", "67890\t3"] == sorted(with_header[1:])
    )
    assert main(["query", str(demo_store), "root/+:+hits", "--no-header", "--format", "json"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)) == [
        ["11111", 1],
        ["12345", 3],
        ["22222", 1],
        ["67890", 3],
    ]
