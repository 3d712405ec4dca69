"""What the commands show, without a store: tables round real numbers for display only,
and ``info`` shows a load's counts per source as a table."""

from __future__ import annotations

import io
from typing import Any

from shell.output.formats import write_rows
from shell.output.info import _write_sources


def test_tables_round_real_numbers_for_display_only() -> None:
    rows: list[Any] = [("a", 1 / 3), ("b", 2.5)]
    table, tsv = io.StringIO(), io.StringIO()
    write_rows(rows, table, "table", columns=["n", "v"])
    write_rows(rows, tsv, "tsv", header=False)
    assert table.getvalue() == "n         v\na  0.333333\nb       2.5\n"
    assert tsv.getvalue() == f"a\t{1 / 3}\nb\t2.5\n"


def test_info_shows_a_load_as_a_table() -> None:
    out = io.StringIO()
    sources = {"mapping": {"files": 1, "records": 12, "rejected": 0}, "attributes": {"files": 0}}
    _write_sources(sources, out)
    assert out.getvalue() == (
        "      source      files  records\n"
        "      attributes      0        0\n"
        "      mapping         1       12\n"
    )  # a count that is 0 everywhere (rejected) is left out
