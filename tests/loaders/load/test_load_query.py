"""End to end on the shared local SparkSession: load, incremental load, query, CLI."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import treestore
from loaders import load_job, run_load
from query.driver.runner import QueryStore
from shell.cli import main
from shell.demo import (
    DEMO_ANSWER_OPS,
    DEMO_ANSWER_ROPS,
    DEMO_OPS,
    DEMO_PATH,
    pasteable_command,
    path_hint,
)
from treestore.events import as_lines

pytestmark = pytest.mark.spark

EXPECTED_JOIN = [("abc", "1,3,4,5"), ("xyz", "1,2"), ("zzz", "1,2")]
SEED_ROWS = {
    ("12345", "A", "1"),
    ("12345", "A", "3"),
    ("12345", "A", "4"),
    ("12345", "A", "5"),
    ("12345", "M", "abc"),
    ("67890", "A", "1"),
    ("67890", "A", "2"),
    ("67890", "M", "xyz"),
    ("67890", "M", "zzz"),
}


def _load(spark: object, demo_dir: Path, store: Path) -> int | None:
    return run_load(spark, load_job(demo_dir / "job.json"), store).version  # type: ignore[arg-type]


def _with_shards(demo_dir: Path, shards: int) -> None:
    job_file = demo_dir / "job.json"
    job = json.loads(job_file.read_text())
    job["shards"] = shards
    job_file.write_text(json.dumps(job))


def _answer(handle: QueryStore) -> list[tuple[object, ...]]:
    """The store's own PUID -> attribute ids (the demo's last query)."""
    return handle.query(DEMO_PATH, rops=DEMO_ANSWER_ROPS, ops=DEMO_ANSWER_OPS).to_list()


def test_demo_join_through_the_python_api(spark: object, demo_dir: Path) -> None:
    store = demo_dir / "store"
    assert _load(spark, demo_dir, store) == 1
    handle = treestore.open(store, spark=spark)  # type: ignore[arg-type]
    rows = handle.query(DEMO_PATH, rops=DEMO_OPS).to_list()
    assert rows == [("12345", "A=1,A=3,A=4,A=5,M=abc"), ("67890", "A=1,A=2,M=xyz,M=zzz")]
    assert _answer(handle) == EXPECTED_JOIN
    assert set(handle.query(DEMO_PATH).to_list()) == SEED_ROWS
    hits = dict(handle.query("root/+:+hits").to_list())  # type: ignore[arg-type]
    assert hits == {"12345": 3, "67890": 3, "11111": 1, "22222": 1}
    table = handle.query("root/+:+nodes").to_arrow()
    assert (
        table.column_names == ["name", "nodes"] and str(table.schema.field("nodes").type) == "int64"
    )
    frame = handle.query(DEMO_PATH, rops=DEMO_OPS, ops="merge=ij").to_pandas()
    assert frame.shape == (1, 1) and frame.iloc[0, 0].count("M=") == 3


def test_demo_command_prints_the_join_and_its_commands(
    spark: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--workdir", str(tmp_path / "work")]) == 0
    out = capsys.readouterr().out
    typed, on_path = pasteable_command()
    assert not on_path and typed.endswith(" -m treestore")  # pytest runs it, not the script
    assert f"$ {typed} load" in out and f"$ {typed} query" in out
    assert f"# (to type just `treestore`: {path_hint(typed)})" in out
    answer = out.split("the join, one PUID per line with its attribute ids, answered by the store:")
    command, *lines = answer[1].strip().splitlines()
    quoted = shlex.quote(DEMO_ANSWER_ROPS), shlex.quote(DEMO_ANSWER_OPS)
    assert f"--rops {quoted[0]} --ops {quoted[1]}" in command
    assert shlex.split(command)[-4:] == ["--rops", DEMO_ANSWER_ROPS, "--ops", DEMO_ANSWER_OPS]
    assert lines == ["M\tA", "abc\t1,3,4,5", "xyz\t1,2", "zzz\t1,2"]


def test_query_command_formats(
    spark: object, demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = demo_dir / "store"
    _load(spark, demo_dir, store)
    assert main(["query", str(store), DEMO_PATH, "--rops", DEMO_OPS, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"name": "12345", "name3": "A=1,A=3,A=4,A=5,M=abc"},
        {"name": "67890", "name3": "A=1,A=2,M=xyz,M=zzz"},
    ]
    assert main(["query", str(store), "root/+:+hits", "--format", "table"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == ["name", "hits"]
    assert main(["query", str(store), "root/+:+hits", "--ops", "sort=0:x"]) == 0
    assert "treestore query: warning: " in capsys.readouterr().err  # a lenient op argument
    assert sorted(lines) == ["11111     1", "12345     3", "22222     1", "67890     3"]


def test_second_load_reads_nothing_and_changes_nothing(spark: object, demo_dir: Path) -> None:
    store = demo_dir / "store"
    assert _load(spark, demo_dir, store) == 1

    def data() -> list[Path]:  # every file but the lock's leases (a load takes the lock)
        return sorted(p.relative_to(store) for p in store.rglob("*") if "locks" not in p.parts)

    before = data()
    lines: list[str] = []
    result = run_load(
        spark, load_job(demo_dir / "job.json"), store, on_event=as_lines(lines.append)
    )  # type: ignore[arg-type]
    assert result.version is None
    assert "nothing new to load: the store is unchanged" in lines
    assert data() == before
    assert treestore.open(store).version == 1


def test_new_mapping_files_load_incrementally(spark: object, demo_dir: Path) -> None:
    store = demo_dir / "store"
    _load(spark, demo_dir, store)
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text(
        "TIME\tUID\tPUID\n1419441800000\t11111\tqqq\n1419441800000\t55555\tnobody\n"
    )
    assert _load(spark, demo_dir, store) == 2
    handle = treestore.open(store, spark=spark)  # type: ignore[arg-type]
    joined = _answer(handle)
    assert joined == [*EXPECTED_JOIN[:1], ("qqq", "1,2"), *EXPECTED_JOIN[1:]]
    assert "55555" not in {row[0] for row in handle.query("root/+")}
    report = handle.store_version.manifest.loads[-1]
    assert report["sources"]["mapping"]["missed_updates"] == 1
    assert report["sources"]["mapping"]["files"] == 1
    assert report["sources"]["attributes"]["files"] == 0
    inputs = handle.store_version.manifest.inputs
    assert inputs["mapping/mapping-0002.tsv"]["records"] == 2  # source / path under its root
    # the previous version is still readable, unchanged
    old = handle.store_version.manifest.trees
    assert treestore.open(store).store_version.manifest.trees == old


def test_eight_shards_answer_like_one(spark: object, demo_dir: Path, tmp_path: Path) -> None:
    answers = {}
    for shards in (1, 8):
        _with_shards(demo_dir, shards)
        store = tmp_path / f"store-{shards}"
        _load(spark, demo_dir, store)
        handle = treestore.open(store, spark=spark)  # type: ignore[arg-type]
        assert handle.shards == shards
        answers[shards] = (
            _answer(handle),
            sorted(handle.query("root/+/+/+:+hits")),
        )
    assert answers[1] == answers[8]
    assert answers[8][0] == EXPECTED_JOIN


def test_each_shard_tree_holds_only_its_own_uids(spark: object, demo_dir: Path) -> None:
    from treestore.sharding import shard_of

    store = demo_dir / "store"
    _load(spark, demo_dir, store)
    version = treestore.open(store).store_version
    for shard in version.manifest.trees:
        tree = version.tree(shard)
        root = tree.child(tree.root, "root")
        assert root is not None
        assert all(shard_of(uid.name, 8) == shard for uid in tree.children(root))


def test_python_shard_function_matches_spark(spark: object) -> None:
    from pyspark.sql import functions as F

    from treestore.sharding import shard_of

    keys = ["12345", "", "é", "日本", "\U0001f600", "a" * 70, *map(str, range(200))]
    frame = spark.createDataFrame([(k,) for k in keys], "k string")  # type: ignore[attr-defined]
    rows = frame.select("k", F.pmod(F.xxhash64("k"), F.lit(13)).alias("s")).collect()
    assert {r["k"]: r["s"] for r in rows} == {k: shard_of(k, 13) for k in keys}


def test_shard_count_mismatch_is_refused(spark: object, demo_dir: Path) -> None:
    store = demo_dir / "store"
    _load(spark, demo_dir, store)
    _with_shards(demo_dir, 4)
    with pytest.raises(treestore.StoreError, match="8 shards"):
        _load(spark, demo_dir, store)
    _with_shards(demo_dir, 8)
    config = json.loads((store / "store.json").read_text())
    (store / "store.json").write_text(json.dumps({**config, "hash": "murmur3-utf8"}))
    # its manifests say which hash wrote them: store.json changed by hand is named as such
    with pytest.raises(treestore.StoreError, match=r"store\.json says the shard hash is 'murmur3"):
        _load(spark, demo_dir, store)


@pytest.mark.parametrize(
    ("args", "column", "words"),
    [
        (["root/+:nodez>1"], 8, "Unexpected"),
        (["root/+", "--rops", "str=c1,cat"], 8, "needs 2 values"),
        (["root/+", "--ops", "merge=kzj"], 8, "unknown column letter"),
    ],
)
def test_bad_path_or_op_fails_with_the_column(
    spark: object,
    demo_dir: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    column: int,
    words: str,
) -> None:
    store = demo_dir / "store"
    _load(spark, demo_dir, store)
    assert main(["query", str(store), *args]) == 2
    err = capsys.readouterr().err
    assert f"column {column}" in err and words in err and "Traceback" not in err
    caret = next(line for line in err.splitlines() if line.strip() == "^")
    assert caret.index("^") == 2 + column - 1


def test_cli_errors_have_no_traceback(tmp_path: Path) -> None:
    """Through a real process: a missing store and a broken job file (no Spark needed)."""
    bad_job = tmp_path / "job.json"
    bad_job.write_text('{"shards": 2,\n "source": [}\n')
    for args, words in [
        (["query", str(tmp_path / "nowhere"), "root/+"], "does not exist"),
        (["load", str(bad_job), "--store", str(tmp_path / "s")], "Line 2, column 13"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "treestore", *args], capture_output=True, text=True
        )
        assert done.returncode == 2
        assert words in done.stderr and "Traceback" not in done.stderr


def test_unreadable_input_fails_the_load_and_publishes_nothing(
    spark: object, tmp_path: Path
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    (tmp_path / "job.json").write_text(
        json.dumps(
            {
                "shards": 2,
                "source": [{"path": "in/", "format": "parquet", "shard_by": "K"}],
                "tree": {"root": [{"type": "value", "key": "K"}]},
            }
        )
    )
    with pytest.raises(treestore.LoadError, match=r"broken\.parquet cannot be read as parquet"):
        run_load(spark, load_job(tmp_path / "job.json"), tmp_path / "store")  # type: ignore[arg-type]
    assert not (tmp_path / "store").exists()  # a failed first load leaves no store behind


def test_damaged_tree_is_reported_by_query_and_load(spark: object, demo_dir: Path) -> None:
    store = demo_dir / "store"
    _load(spark, demo_dir, store)
    handle = treestore.open(store, spark=spark)  # type: ignore[arg-type]
    shard = max(handle.store_version.manifest.trees)
    pages = store / f"{handle.store_version.shard_state(shard).runs[0]}.pages"
    damaged = bytearray(pages.read_bytes())
    damaged[-3] ^= 0xFF
    pages.write_bytes(bytes(damaged))
    with pytest.raises(treestore.StoreError, match=f"Shard {shard}: page 0 of .*checksum"):
        handle.query("root/+").to_list()
    (demo_dir / "mapping" / "mapping-0002.tsv").write_text(
        "TIME\tUID\tPUID\n1\t12345\tnew\n1\t67890\tnew\n"
    )
    with pytest.raises(treestore.LoadError, match=r"page 0 of .*fails its checksum"):
        _load(spark, demo_dir, store)
    assert treestore.open(store).version == 1


@pytest.mark.parametrize(
    ("variable", "value", "args"),
    [
        ("TREESTORE_LOCAL_QUERY_LIMIT", "lots", ["root/+"]),
        ("TREESTORE_SORT_ROWS", "2.5", ["root/+", "--ops", "sort=0"]),
        ("TREESTORE_CACHE_MB", "big", ["root/12345/+"]),
    ],
)
def test_a_bad_setting_is_named_without_a_traceback(
    spark: object,
    demo_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    args: list[str],
) -> None:
    from treestore.storage import page_cache

    store = demo_dir / "store"
    _load(spark, demo_dir, store)
    monkeypatch.setenv(variable, value)
    monkeypatch.setattr(page_cache, "_CACHE", None)  # the cache budget is read on first use
    assert main(["query", str(store), *args]) == 2
    err = capsys.readouterr().err
    assert f"{variable}={value!r} is not" in err and "Traceback" not in err
