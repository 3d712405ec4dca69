"""``Rows.to_parquet``: a query's rows as a Parquet file or a folder of part files.

What is written is read back with ``pyarrow.parquet.read_table`` and compared, whole and
sorted, with ``to_arrow()`` of the same query: the same schema and the same rows. A write
that fails leaves nothing under its final names and no temporary file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs as pafs

from query.driver.parquet_out import parquet_target, write_parquet
from query.driver.runner import QueryStore, open_store
from treestore.errors import OutputError, StoreError
from treestore.faults import DISK_BYTES_VARIABLE, DISK_FOLDER_VARIABLE


def _sorted_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(row.values()) for row in table.to_pylist()), key=repr)


def _assert_same(written: pa.Table, expected: pa.Table) -> None:
    assert written.schema.equals(expected.schema), (written.schema, expected.schema)
    assert _sorted_rows(written) == _sorted_rows(expected)


def _expected(store: QueryStore, path: str, rops: str | None, ops: str | None) -> pa.Table:
    return store.query(path, rops=rops, ops=ops).to_arrow()


@pytest.fixture
def demo(demo_store: Path, spark: Any) -> QueryStore:
    """The demo store, every query of it run as a Spark job (none walked on the driver)."""
    store = open_store(str(demo_store), spark)
    store.local_limit = -1
    return store


@pytest.fixture(scope="module")
def attachments_store(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> QueryStore:
    """A store whose UID nodes keep a sum attachment: whole and real numbers, and none."""
    from loaders import load_job, run_load

    folder = tmp_path_factory.mktemp("attachments")
    (folder / "in").mkdir()
    (folder / "in" / "a.csv").write_text("K,N,U\na,1,x\na,2,y\na,3,x\nb,4.5,z\nc,,z\n")
    total = {"total": {"type": "sum", "key": "N"}}
    job = {
        "shards": 2,
        "source": [{"name": "s", "path": "in/", "format": "csv", "shard_by": "K"}],
        "tree": {
            "root": [
                {"type": "const", "value": "root"},
                {"type": "value", "key": "K", "data": total},
                {"type": "value", "key": "U"},
            ]
        },
    }
    (folder / "job.json").write_text(json.dumps(job))
    run_load(spark, load_job(folder / "job.json"), folder / "store")
    store = open_store(str(folder / "store"), spark)
    store.local_limit = -1
    return store


@pytest.mark.parametrize(
    ("path", "rops", "ops", "streams"),
    [
        ("root/+/+:+hits", None, None, True),  # a scan on columns
        ("root/+/+/+:+hits", None, "gather=ikis", True),  # driver ops on columns
        ("root/+/+/+:+hits", None, "gather=ikis;num=c1,n2,mult", False),  # driver ops on rows
        ("root/+/A/+:+hits", "merge=kis;num=c1,n2,add", "gather=ks", False),  # rops on rows
        ("root/12345/+/+:+hits", None, None, True),  # walked on the driver
    ],
)
def test_a_query_written_as_one_file_reads_back_as_its_arrow_table(
    demo: QueryStore, tmp_path: Path, path: str, rops: str | None, ops: str | None, streams: bool
) -> None:
    if path.startswith("root/12345"):
        demo.local_limit = 20_000
    expected = _expected(demo, path, rops, ops)
    assert expected.num_rows > 0
    rows = demo.query(path, rops=rops, ops=ops)
    assert rows.plan.where == ("driver" if path.startswith("root/12345") else "spark")
    assert (rows.plan.piece_types is not None and rows.plan.ops.output_types() is not None) == (
        streams
    )
    written = rows.to_parquet(tmp_path / "out.parquet")
    assert (written.rows, written.columns, written.folder) == (
        expected.num_rows,
        expected.num_columns,
        False,
    )
    assert written.files == (str(tmp_path / "out.parquet"),)
    _assert_same(pq.read_table(tmp_path / "out.parquet"), expected)
    assert os.listdir(tmp_path) == ["out.parquet"]  # no temporary file left


def test_rows_from_row_ops_and_an_attachment_are_typed_as_to_arrow_types_them(
    attachments_store: QueryStore, tmp_path: Path
) -> None:
    path, rops = "root/+:+hits$+total=sum", "num=c1,n2,mult,v1,set"
    expected = _expected(attachments_store, path, rops, None)
    assert [str(t) for t in expected.schema.types] == ["string", "int64", "double"]
    assert _sorted_rows(expected) == [("a", 6, 6.0), ("b", 2, 4.5), ("c", 2, 0.0)]
    attachments_store.query(path, rops=rops).to_parquet(tmp_path / "att.parquet")
    _assert_same(pq.read_table(tmp_path / "att.parquet"), expected)


def test_a_folder_gets_part_files_of_at_most_rows_per_part_rows(
    demo: QueryStore, tmp_path: Path
) -> None:
    path = "root/+/+/+:+hits"
    expected = _expected(demo, path, None, None)
    assert expected.num_rows == 12
    folder = tmp_path / "results"
    folder.mkdir()
    written = demo.query(path).to_parquet(folder, rows_per_part=5)
    names = [f"part-{n:05d}.parquet" for n in range(3)]
    assert written.files == tuple(str(folder / name) for name in names)
    assert sorted(os.listdir(folder)) == names
    assert [pq.ParquetFile(folder / name).metadata.num_rows for name in names] == [5, 5, 2]
    assert written.folder and written.rows == 12
    _assert_same(pq.read_table(folder), expected)
    # a path ending in / or a file:// URI names a folder too
    as_uri = demo.query(path).to_parquet(f"file://{tmp_path}/by-uri/")
    assert as_uri.folder and as_uri.files == (f"{tmp_path}/by-uri/part-00000.parquet",)
    _assert_same(pq.read_table(tmp_path / "by-uri"), expected)


def test_an_empty_result_keeps_its_columns_and_types(demo: QueryStore, tmp_path: Path) -> None:
    for n, (path, rops) in enumerate(
        [("root/+:nodes>100/+:+hits", None), ("root/+:nodes>100/+:+hits", "num=c1,n2,add")]
    ):
        expected = _expected(demo, path, rops, None)
        assert expected.num_rows == 0 and expected.column_names == ["name", "name2", "hits"]
        written = demo.query(path, rops=rops).to_parquet(tmp_path / f"empty{n}.parquet")
        assert written.rows == 0
        table = pq.read_table(tmp_path / f"empty{n}.parquet")
        assert table.num_rows == 0 and table.schema.equals(expected.schema)
    demo.query("root/+:nodes>100").to_parquet(f"{tmp_path}/none/", rows_per_part=1)
    assert os.listdir(tmp_path / "none") == ["part-00000.parquet"]


def test_what_is_there_is_replaced_only_when_asked(demo: QueryStore, tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    demo.query("root/+:+hits").to_parquet(out)
    rows = demo.query("root/+/+:+hits")
    with pytest.raises(OutputError, match=r"out\.parquet exists: pass overwrite=True"):
        rows.to_parquet(out)
    assert len(rows.to_list()) == 6  # refused before the query ran: every row still there
    written = demo.query("root/+/+:+hits").to_parquet(out, overwrite=True)
    _assert_same(pq.read_table(out), _expected(demo, "root/+/+:+hits", None, None))
    assert written.rows == 6 and os.listdir(tmp_path) == ["out.parquet"]
    folder = tmp_path / "parts"
    demo.query("root/+/+/+:+hits").to_parquet(f"{folder}/", rows_per_part=3)
    (folder / "notes.txt").write_text("kept")
    with pytest.raises(OutputError, match=r"holds 4 part file\(s\).*pass overwrite=True"):
        demo.query("root/+:+hits").to_parquet(folder)
    demo.query("root/+:+hits").to_parquet(folder, overwrite=True, rows_per_part=3)
    assert sorted(os.listdir(folder)) == ["notes.txt", "part-00000.parquet", "part-00001.parquet"]
    whole = pa.concat_tables(pq.read_table(folder / p) for p in sorted(os.listdir(folder))[1:])
    _assert_same(whole, _expected(demo, "root/+:+hits", None, None))


def test_a_place_that_cannot_be_written_is_refused_before_the_query_runs(
    demo: QueryStore, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("x")
    rows = demo.query("root/+:+hits")
    with pytest.raises(OutputError, match=r"file is a file, not a folder"):
        rows.to_parquet(tmp_path / "file" / "out.parquet")
    with pytest.raises(OutputError, match=r"file is a file, not a folder: name a folder"):
        rows.to_parquet(f"file://{tmp_path}/file")
    with pytest.raises(OutputError, match=r"is inside the store .*: write the results elsewhere"):
        rows.to_parquet(Path(demo.store_version.location) / "results.parquet")
    assert len(rows.to_list()) == 4


def test_an_error_while_the_rows_arrive_leaves_no_file(demo: QueryStore, tmp_path: Path) -> None:
    """A failure after some files were written: nothing under the final names, and the
    temporary files removed (in a folder of parts, and for one file)."""
    table = _expected(demo, "root/+/+/+:+hits", None, None)

    def failing() -> Iterator[pa.RecordBatch]:
        yield from table.to_batches(max_chunksize=2)
        raise StoreError("The query was stopped before all its rows came.")

    for target, per_part in ((f"{tmp_path}/parts/", 3), (tmp_path / "one.parquet", 10**6)):
        with pytest.raises(StoreError, match="stopped"):
            write_parquet(parquet_target(target), failing(), table.schema, rows_per_part=per_part)
    assert os.listdir(tmp_path) == ["parts"] and os.listdir(tmp_path / "parts") == []


def test_a_cancelled_query_leaves_no_file(demo: QueryStore, tmp_path: Path) -> None:
    rows = demo.query("root/+/+/+:+hits")
    rows.cancel()
    with pytest.raises(StoreError, match="stopped"):
        rows.to_parquet(tmp_path / "out.parquet")
    assert os.listdir(tmp_path) == []


def test_a_full_disk_in_the_middle_leaves_no_file(
    demo: QueryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills up while the second part is written (the first was whole): the
    error is one line naming the target, and the folder is left empty."""
    demo.query("root/+/+/+:+hits").to_parquet(tmp_path / "sizes", rows_per_part=4)
    first = (tmp_path / "sizes" / "part-00000.parquet").stat().st_size
    full = tmp_path / "full"
    full.mkdir()
    monkeypatch.setenv(DISK_FOLDER_VARIABLE, str(full))
    monkeypatch.setenv(DISK_BYTES_VARIABLE, str(first + first // 2))
    with pytest.raises(OutputError, match=r"Cannot write .*full.*No space left on device"):
        demo.query("root/+/+/+:+hits").to_parquet(full, rows_per_part=4)
    assert os.listdir(full) == []


@pytest.mark.s3
def test_a_result_written_to_an_s3_folder_reads_back(
    demo: QueryStore, s3_bucket: str, tmp_path: Path
) -> None:
    path = "root/+/+/+:+hits"
    expected = _expected(demo, path, None, None)
    written = demo.query(path).to_parquet(f"{s3_bucket}/results/", rows_per_part=5)
    bucket = s3_bucket.removeprefix("s3://")
    assert written.files == tuple(f"s3://{bucket}/results/part-{n:05d}.parquet" for n in range(3))
    filesystem, folder = pafs.FileSystem.from_uri(f"{s3_bucket}/results")
    _assert_same(pq.read_table(folder, filesystem=filesystem), expected)
    with pytest.raises(OutputError, match=r"holds 3 part file\(s\).*pass overwrite=True"):
        demo.query(path).to_parquet(f"{s3_bucket}/results/")
    demo.query("root/+:+hits").to_parquet(f"{s3_bucket}/results/", overwrite=True)
    listed = filesystem.get_file_info(pafs.FileSelector(folder))
    assert [info.base_name for info in listed] == ["part-00000.parquet"]
    _assert_same(
        pq.read_table(folder, filesystem=filesystem), _expected(demo, "root/+:+hits", None, None)
    )
