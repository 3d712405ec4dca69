"""The sweep's inputs: every format, a file, a folder or a glob, local or on the S3 server,
read in the tasks and typed as Spark's schema inference types them."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders.sweep.inputs import format_of, read_table
from treestore.errors import LoadError
from treestore.filesystems import open_location

pytestmark = pytest.mark.spark


def _typed_rows(frame: Any) -> tuple[dict[str, str], list[tuple[Any, ...]]]:
    kinds = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    return kinds, sorted((tuple(row) for row in frame.collect()), key=repr)


def test_formats_are_told_by_name_or_refused() -> None:
    assert [format_of(n) for n in ("a.csv", "b.TSV", "c.json.gz", "d.jsonl", "e.parquet")] == [
        "csv", "tsv", "json", "json", "parquet",
    ]  # fmt: skip
    assert format_of("notes.txt") is None and format_of("folder/") is None


def test_columns_are_typed_as_spark_infers_them(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "e.csv").write_text(
        "id,time,points,label,big,when\n"
        "1,5,2.5,x,1,2024-01-01 10:00:00\n"
        "2,7,3,7,9223372036854775807,\n"
        "3,,,y,2,2024-01-02\n"
    )
    kinds, rows = _typed_rows(read_table(spark, str(tmp_path / "e.csv")))
    assert kinds == {"id": "int", "time": "int", "points": "double", "label": "string",
                     "big": "bigint", "when": "string"}  # fmt: skip
    assert rows[0] == (1, 5, 2.5, "x", 1, "2024-01-01 10:00:00")
    assert rows[2] == (3, None, None, "y", 2, "2024-01-02")
    # the same table as gzipped tsv files in a folder, as json lines, as Parquet
    folder = tmp_path / "tsv"
    folder.mkdir()
    (folder / "1.tsv.gz").write_bytes(gzip.compress(b"id\ttime\n1\t5\n"))
    (folder / "2.tsv.gz").write_bytes(gzip.compress(b"id\ttime\n2\t7.5\n"))
    (folder / "_SUCCESS").write_text("")
    assert _typed_rows(read_table(spark, str(folder))) == (
        {"id": "int", "time": "double"}, [(1, 5.0), (2, 7.5)]
    )  # fmt: skip
    (tmp_path / "e.json").write_text('{"id": 1, "time": 5}\n{"id": 2, "time": 7, "extra": "z"}\n')
    assert _typed_rows(read_table(spark, str(tmp_path / "e.json"))) == (
        {"id": "int", "time": "int", "extra": "string"}, [(1, 5, None), (2, 7, "z")]
    )  # fmt: skip
    pq.write_table(pa.table({"id": [1, 2], "time": [0.5, 1.5]}), tmp_path / "e.parquet")
    assert _typed_rows(read_table(spark, str(tmp_path / "e.parquet"))) == (
        {"id": "int", "time": "double"}, [(1, 0.5), (2, 1.5)]
    )  # fmt: skip


def test_a_row_the_reader_sets_aside_is_kept_as_nulls_to_be_counted(
    spark: Any, tmp_path: Path
) -> None:
    (tmp_path / "e.csv").write_text("id,time\n1,5\n2,6,7\n3,8\n")
    assert _typed_rows(read_table(spark, str(tmp_path / "e.csv")))[1] == [
        (1, 5), (3, 8), (None, None)  # the row with 3 values: counted by the sweep as skipped
    ]  # fmt: skip


def test_bad_inputs_are_refused_with_what_to_do(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"nope\.csv does not exist: give a csv, tsv"):
        read_table(spark, str(tmp_path / "nope.csv"))
    (tmp_path / "notes.txt").write_text("id,time\n")
    with pytest.raises(LoadError, match=r"Cannot tell the format of .*notes\.txt"):
        read_table(spark, str(tmp_path / "notes.txt"))
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "a.csv").write_text("id,time\n1,2\n")
    (tmp_path / "mixed" / "b.json").write_text('{"id": 1, "time": 2}\n')
    with pytest.raises(LoadError, match=r"Cannot tell the format of .*mixed"):
        read_table(spark, str(tmp_path / "mixed"))
    (tmp_path / "notes.txt").write_text("id,time\n1,2\n")
    assert _typed_rows(read_table(spark, str(tmp_path / "notes.txt"), "csv"))[1] == [(1, 2)]
    (tmp_path / "empty").mkdir()
    with pytest.raises(LoadError, match="empty holds no files"):
        read_table(spark, str(tmp_path / "empty"), "csv")


def test_inputs_on_the_s3_server_by_glob(spark: Any, s3_bucket: str) -> None:
    for name, text in (("e1.csv", "id,time\n1,5\n"), ("e2.csv", "id,time\n2,9\n")):
        filesystem, path = open_location(f"{s3_bucket}/events/{name}")
        with filesystem.open_output_stream(path) as out:
            out.write(text.encode())
    frame = read_table(spark, f"{s3_bucket}/events/e*.csv")
    assert _typed_rows(frame) == ({"id": "int", "time": "int"}, [(1, 5), (2, 9)])
    parquet = io.BytesIO()
    pq.write_table(pa.table({"id": ["a"], "time": [json.dumps(1)]}), parquet)
    filesystem, path = open_location(f"{s3_bucket}/p/one.parquet")
    with filesystem.open_output_stream(path) as out:
        out.write(parquet.getvalue())
    assert _typed_rows(read_table(spark, f"{s3_bucket}/p/")) == (
        {"id": "string", "time": "int"}, [("a", 1)]
    )  # fmt: skip


def test_the_sweep_command_takes_a_format_and_inputs_at_uris(
    spark: Any, s3_bucket: str, capsys: Any
) -> None:
    from shell.cli import main

    for name, text in (
        ("e.txt", "id,time\n1,5\n2,9\n"),
        ("i.txt", "id,start,end,points\n1,0,6,3\n"),
    ):
        filesystem, path = open_location(f"{s3_bucket}/in/{name}")
        with filesystem.open_output_stream(path) as out:
            out.write(text.encode())
    store = f"{s3_bucket}/store"
    args = ["sweep", "--events", f"{s3_bucket}/in/e.txt", "--intervals", f"{s3_bucket}/in/i.txt",
            "--store", store, "--name", "s", "--out", f"{s3_bucket}/out"]  # fmt: skip
    assert main(args) == 2
    assert "Cannot tell the format of" in capsys.readouterr().err
    filesystem, folder = open_location(store)
    assert filesystem.get_file_info(folder).type.name == "NotFound"  # nothing made
    assert main([*args, "--format", "csv"]) == 0
    capsys.readouterr()
    assert main(["query", store, "s/+/+/+", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    cells = [list(r.values()) if isinstance(r, dict) else r for r in rows]  # objects or lists
    assert cells == [["1", "5", "3"], ["2", "9", "0"]]
    filesystem, folder = open_location(f"{s3_bucket}/out")
    written = pq.read_table(folder, filesystem=filesystem).to_pylist()
    assert sorted((r["id"], r["time"], r["value"]) for r in written) == [(1, 5, 3), (2, 9, 0)]
