"""With real loads: a dedup run whose bytes changed but still read is named by check and
rebuilt by the next load (no record counted twice; an INDEX that fails its checksum takes
the path of a damaged one, tested in tests/loaders/load/test_dedup_load.py); a load that
fails cleanly leaves only what published versions use, and the rejected records its
message names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loaders import load_job, run_load
from shell.cli import main
from tests.support.jobs import CLICKS_FIRST, CLICKS_SECOND, load_clicks, write_clicks
from treestore.errors import LoadError
from treestore.store.versions import open_version

pytestmark = pytest.mark.spark


def _check(store: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["check", str(store)])
    return status, capsys.readouterr().out


def test_a_damaged_dedup_run_is_rebuilt_and_a_failed_load_cleans_up(
    spark: Any, clicks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = clicks / "store"
    write_clicks(clicks, "c1.tsv", CLICKS_FIRST)
    load_clicks(spark, clicks)
    # a key in a dedup run changes ("u1" -> "x1"), the file still reads
    run = next(p for p in (store / "dedup").rglob("*.arrow") if b'"u1"' in p.read_bytes())
    run.write_bytes(run.read_bytes().replace(b'"u1"', b'"x1"', 1))
    status, out = _check(store, capsys)
    assert status == 1 and f"{run} is damaged" in out and "The next load rebuilds" in out
    write_clicks(clicks, "c2.tsv", CLICKS_SECOND)
    lines: list[str] = []
    counts = load_clicks(spark, clicks, lines)["sources"]["clicks"]
    assert any("rebuilding it" in line for line in lines), lines
    assert counts["duplicates_of_earlier_loads"] == 2 and counts["kept"] == 1
    assert _check(store, capsys)[0] == 0
    # a load that fails (too many rejected records) after its tasks wrote runs and keys
    before = {str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()}
    (clicks / "clicks" / "c4.tsv").write_text("TIME\tUID\tURL\n1\tu5\n10\tu10\tq\n")
    with pytest.raises(LoadError, match="rejected") as failed:
        run_load(spark, load_job(clicks / "job.json"), store, max_rejected=0)
    after = {str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()}
    new = {name for name in after - before if not name.startswith("locks/")}
    assert new and all(name.startswith("rejected/") for name in new), new
    assert all(name.rsplit("/", 1)[0] in str(failed.value) for name in new)
    version = open_version(store)
    used = version.manifest.runs()
    runs = {n.rsplit(".", 1)[0] for n in after if n.startswith("trees/")}
    assert runs == used and _check(store, capsys)[0] == 0
