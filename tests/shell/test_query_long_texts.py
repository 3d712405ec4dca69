"""``treestore query`` with thousands of ops and path elements: rops pickled into Spark's
tasks and run there on columns, ops on the driver, a long path walked by both engines
(2,000 chained ops once ended in a RecursionError traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shell.cli import main

ANSWER = ["M\tA", "abc\t1,3,4,5", "xyz\t1,2", "zzz\t1,2"]
"""The demo's join (README), PUID -> attribute ids."""


@pytest.mark.parametrize("where", ["spark", "driver"])
def test_the_demo_join_through_2000_rops_2000_ops_and_a_path_of_2000_more_elements(
    where: str,
    demo_store: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TREESTORE_LOCAL_QUERY_LIMIT", "-1" if where == "spark" else "1000000")
    # each "(1)*/.." goes down to one child and back: the path answers as root/+:nodes>1/+/+
    path = "root/" + "(1)*/../" * 1_000 + "+:nodes>1/+/+"
    rops = "cross=0,1,2,M,A,list" + ";sort" * 2_000
    ops = "gather=kJ" + ";sort" * 2_000
    assert main(["query", str(demo_store), path, "--rops", rops, "--ops", ops]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ANSWER
    assert "Traceback" not in err
