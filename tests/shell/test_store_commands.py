"""treestore info, gc and check on a real store; versions kept and readers' isolation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import treestore
from loaders import load_job, run_load
from shell.cli import main
from treestore.store.versions import open_version, published_versions

pytestmark = pytest.mark.spark


def _load_versions(spark: object, demo_dir: Path, store: Path, count: int) -> None:
    run_load(spark, load_job(demo_dir / "job.json"), store, keep_versions=100)  # type: ignore[arg-type]
    for i in range(2, count + 1):
        (demo_dir / "mapping" / f"more-{i}.tsv").write_text(f"TIME\tUID\tPUID\n1\t12345\tp{i}\n")
        run_load(spark, load_job(demo_dir / "job.json"), store, keep_versions=100)  # type: ignore[arg-type]


def test_readers_keep_their_version_while_loads_publish(spark: object, demo_dir: Path) -> None:
    store = demo_dir / "store"
    _load_versions(spark, demo_dir, store, 1)
    reader = treestore.open(store, spark=spark)  # type: ignore[arg-type]
    (demo_dir / "mapping" / "late.tsv").write_text("TIME\tUID\tPUID\n1\t12345\tlate\n")
    run_load(spark, load_job(demo_dir / "job.json"), store)  # type: ignore[arg-type]
    assert reader.version == 1
    assert ("12345", "late") not in reader.query("root/+/M/+").to_list()
    assert ("12345", "late") in treestore.open(store, spark=spark).query("root/+/M/+").to_list()  # type: ignore[arg-type]


def test_gc_keeps_the_newest_versions_and_their_files(
    spark: object, demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = demo_dir / "store"
    _load_versions(spark, demo_dir, store, 7)
    assert published_versions(open_version(store).pages) == list(range(1, 8))
    expected = sorted(treestore.open(store, spark=spark).query("root/+/+/+:+hits").to_list())  # type: ignore[arg-type]
    assert main(["gc", str(store), "--keep", "2"]) == 0
    assert "removed 5 old version(s)" in capsys.readouterr().out
    assert published_versions(open_version(store).pages) == [6, 7]
    for version in (6, 7):
        for shard, state in open_version(store, version).manifest.trees.items():
            assert open_version(store, version).tree(shard).check() > 0, (version, shard, state)
    assert (
        sorted(treestore.open(store, spark=spark).query("root/+/+/+:+hits").to_list()) == expected
    )  # type: ignore[arg-type]
    assert main(["check", str(store)]) == 0


def test_info_shows_versions_shards_nodes_and_loads(
    spark: object, demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = demo_dir / "store"
    _load_versions(spark, demo_dir, store, 2)
    capsys.readouterr()
    assert main(["info", str(store)]) == 0
    out = capsys.readouterr().out
    assert "version 2 (kept: 1, 2), 8 shards" in out
    manifest = open_version(store).manifest
    total = sum(s.nodes for s in manifest.trees.values())
    assert f"{total:,} nodes" in out
    assert out.count("  shard ") == 8 and "empty" in out
    assert "load -> version 2" in out and "load -> version 1" in out
    # node counts kept in the manifest match a full scan of each shard
    for shard, state in manifest.trees.items():
        assert open_version(store).tree(shard).count_nodes() == state.nodes


def test_check_reports_a_damaged_page(
    spark: object, demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = demo_dir / "store"
    _load_versions(spark, demo_dir, store, 1)
    pages = next((store / "trees").rglob("*.pages"))
    data = bytearray(pages.read_bytes())
    data[len(data) // 2] ^= 0x01
    pages.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["check", str(store)]) == 1
    out = capsys.readouterr().out
    assert "1 problem(s) found" in out and str(pages) in out and "checksum" in out


def test_file_uri_store_works(spark: object, demo_dir: Path) -> None:
    store_uri = (demo_dir / "uri-store").resolve().as_uri()
    run_load(spark, load_job(demo_dir / "job.json"), store_uri)  # type: ignore[arg-type]
    rows = treestore.open(store_uri, spark=spark).query("root/+/M/+").to_list()  # type: ignore[arg-type]
    assert sorted(rows) == [("12345", "abc"), ("67890", "xyz"), ("67890", "zzz")]
    assert json.loads((demo_dir / "uri-store" / "store.json").read_text())["shards"] == 8


def test_every_command_on_a_store_on_the_s3_server(
    spark: object, demo_dir: Path, demo_store: Path, s3_bucket: str, capsys: Any
) -> None:
    """load, query, shell -e, info, check and gc on s3://...: what a local folder gives."""
    store = f"{s3_bucket}/store"
    assert main(["load", str(demo_dir / "job.json"), "--store", store]) == 0
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text("TIME\tUID\tPUID\n9\t12345\tnew\n")
    assert main(["load", str(demo_dir / "job.json"), "--store", store]) == 0
    assert "published version 2" in capsys.readouterr().out
    local = demo_dir / "local-store"
    run_load(spark, load_job(demo_dir / "job.json"), local)  # type: ignore[arg-type]
    for argv in (
        ["query", "STORE", "root/+:nodes>1/+/+", "--rops", "str=c1,v=,cat,c2,cat,v2,set;merge=kij"],
        ["query", "STORE", "root/+/+/+:+hits", "--format", "json"],
        ["shell", "STORE", "-e", "root/+:+hits"],
    ):
        assert main([store if a == "STORE" else a for a in argv]) == 0
        on_s3 = capsys.readouterr().out
        assert main([str(local) if a == "STORE" else a for a in argv]) == 0
        assert on_s3 == capsys.readouterr().out and on_s3
    assert main(["info", store]) == 0
    info = capsys.readouterr().out
    assert "version 2" in info and store in info
    assert main(["check", store]) == 0
    assert capsys.readouterr().out == "store is sound\n"
    assert main(["gc", store, "--keep", "1"]) == 0
    assert "removed" in capsys.readouterr().out
    assert main(["check", store]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["gc", "STORE", "--keep", "0"], "--keep: 0 is below 1"),
        (["gc", "STORE", "--keep", "-3"], "--keep: -3 is below 1"),
        (["gc", "STORE", "--keep", "two"], "--keep: 'two' is not a whole number"),
        (
            [
                "sweep",
                "--events",
                "e",
                "--intervals",
                "i",
                "--store",
                "STORE",
                "--name",
                "n",
                "--shards",
                "0",
            ],
            "--shards: 0 is below 1",
        ),
    ],
)
def test_counts_below_their_minimum_are_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    store = tmp_path / "store"
    with pytest.raises(SystemExit) as exited:
        main([str(store) if a == "STORE" else a for a in argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not store.exists()
