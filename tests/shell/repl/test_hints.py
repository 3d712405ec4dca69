"""Hints under a query's rows: keys repeated across shards, names no shard has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shell.repl.hints import missing_name, repeated_keys


def test_repeated_keys_name_the_gather_that_merges_them() -> None:
    rows = [("2024-01-01", 3), ("2024-01-02", 1), ("2024-01-01", 4), ("2024-01-01", 2)]
    assert repeated_keys(rows) == (
        "hint: 2 row(s) repeat a key: each shard sends its own rows; | ops gather=ks merges them"
    )
    assert repeated_keys([("a", "x", 1), ("a", "y", 2)]) is None  # distinct keys
    assert repeated_keys([("a", "x"), ("a", "x")]) is None  # nothing to merge


@pytest.mark.spark
def test_a_name_no_shard_has_says_the_closest(spark: Any, demo_store: Path) -> None:
    from treestore.store.versions import open_version

    version = open_version(demo_store)
    error = missing_name(version, "root/12354/+")
    assert error is not None
    assert (error.reason, error.column) == ("no node under root is named '12354' in any shard", 6)
    assert error.hint == "Closest: 12345."
    assert missing_name(version, "roott/+") is not None
    assert missing_name(version, "root/12345/+") is None


@pytest.mark.spark
def test_an_attachment_no_node_has(spark: Any, demo_store: Path) -> None:
    from treestore.store.versions import open_version

    version = open_version(demo_store)
    assert missing_name(version, "root/+/A") is None  # no attachment read
    error = missing_name(version, "root/+/+%nosuch")
    assert error is not None and error.column == 8
    assert error.reason == "no node here has an attachment 'nosuch'"


@pytest.mark.spark
def test_the_query_command_gives_the_shells_hint_on_stderr(
    spark: Any, demo_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows once per shard on the command line (88 rows for 11 countries, no word, once)."""
    from shell.cli import main

    assert main(["query", str(demo_store), "root/*/A/+:+hits"]) == 0
    captured = capsys.readouterr()
    rows = [line.split("\t") for line in captured.out.splitlines()[1:]]
    assert len(rows) > len({name for name, _ in rows})  # attribute ids repeat across shards
    assert captured.err == (
        f"treestore query: {repeated_keys([(name, int(hits)) for name, hits in rows])}\n"
    )
    assert "| ops gather=ks merges them" in captured.err
    assert main(["query", str(demo_store), "root/*/A/+:+hits", "--ops", "gather=ks"]) == 0
    assert capsys.readouterr().err == ""  # merged: nothing to say
