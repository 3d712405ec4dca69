"""Input files at a URI (the S3 server): listed through pyarrow filesystems (folders, globs,
hidden files), read in the tasks, loaded incrementally; and a task never reads a local
path that only the driver has."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import treestore
from loaders import load_job, run_load
from loaders.job.model import SourceSpec
from loaders.load.inputs import list_input_files
from treestore.errors import LoadError, StoreError
from treestore.events import as_lines
from treestore.filesystems import DRIVER_ONLY_ENV, input_stream, open_location


def _put(uri: str, data: bytes | str) -> None:
    filesystem, path = open_location(uri)
    with filesystem.open_output_stream(path, compression=None) as out:  # bytes as given
        out.write(data.encode() if isinstance(data, str) else data)


def _names(source_path: str, fmt: str = "tsv") -> list[str]:
    files = list_input_files(SourceSpec(name="s", path=source_path, format=fmt))  # type: ignore[arg-type]
    return [f.path for f in files]


def test_folders_globs_and_files_at_a_uri_are_listed_as_locally(s3_bucket: str) -> None:
    for name in ("in/a.tsv", "in/b.tsv", "in/deep/c.tsv", "in/deep/d.csv", "in/_SUCCESS",
                 "in/.hidden.tsv", "in/_tmp/e.tsv", "other/f.tsv"):  # fmt: skip
        _put(f"{s3_bucket}/{name}", "K\tV\nk\tv\n")
    b = s3_bucket
    assert _names(f"{b}/in/") == [f"{b}/in/a.tsv", f"{b}/in/b.tsv", f"{b}/in/deep/c.tsv",
                                  f"{b}/in/deep/d.csv"]  # fmt: skip
    assert _names(f"{b}/in") == _names(f"{b}/in/")
    assert _names(f"{b}/in/*.tsv") == [f"{b}/in/a.tsv", f"{b}/in/b.tsv"]
    # as Python's glob: '**' is any depth, names starting with '.' are hidden, '_' is not
    assert _names(f"{b}/in/**/*.tsv") == [f"{b}/in/_tmp/e.tsv", f"{b}/in/a.tsv", f"{b}/in/b.tsv",
                                          f"{b}/in/deep/c.tsv"]  # fmt: skip
    assert _names(f"{b}/*/deep/?.csv") == [f"{b}/in/deep/d.csv"]
    assert _names(f"{b}/in/b.tsv") == [f"{b}/in/b.tsv"]
    assert _names(f"{b}/nothing/*.tsv") == []
    (found,) = list_input_files(SourceSpec(name="s", path=f"{b}/in/a.tsv", format="tsv"))
    assert found.size == len("K\tV\nk\tv\n") and found.mtime_ns > 0
    with pytest.raises(LoadError, match=r"Source 's': s3://.*/missing does not exist"):
        _names(f"{b}/missing")


def test_a_file_uri_is_the_local_path(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("K\nk\n")
    doc = {"shards": 1, "source": [{"path": f"file://{tmp_path}/in/", "format": "csv"}],
           "tree": {"root": [{"type": "value", "key": "K"}]}}  # fmt: skip
    (tmp_path / "job.json").write_text(json.dumps(doc))
    (source,) = load_job(tmp_path / "job.json").sources
    assert source.path == f"{tmp_path}/in/"
    assert [f.path for f in list_input_files(source)] == [str(tmp_path / "in" / "a.csv")]


def test_a_task_refuses_a_path_only_the_driver_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = tmp_path / "driver"
    own.mkdir()
    (own / "a.tsv").write_text("K\nk\n")
    (tmp_path / "b.tsv").write_text("K\nk\n")
    monkeypatch.setenv(DRIVER_ONLY_ENV, str(own))  # as the executors' environment says
    with pytest.raises(StoreError, match=r"a\.tsv, which only the driver has"):
        input_stream(str(own / "a.tsv"))
    with pytest.raises(StoreError, match="which only the driver has"):
        input_stream(f"file://{own}/a.tsv")
    with input_stream(str(tmp_path / "b.tsv")) as stream:  # a sibling folder is fine
        assert stream.read() == b"K\nk\n"


def _pairs(store: str) -> dict[tuple[str, str], int]:
    rows = treestore.open(store).query("+/+:+hits").to_list()
    return {(k, v): hits for k, v, hits in rows}  # type: ignore[misc]


@pytest.mark.spark
def test_every_format_loads_from_the_s3_server_incrementally(
    spark: Any, s3_bucket: str, tmp_path: Path
) -> None:
    b = s3_bucket
    _put(f"{b}/in/csv/a.csv", 'K,V\na,"x,1"\n')
    _put(f"{b}/in/csv/_ignored.csv", "K,V\nzz,zz\n")
    _put(f"{b}/in/b.tsv.gz", pa.compress(b"b\ty\n", "gzip", asbytes=True))
    _put(f"{b}/in/c1.json", '{"K": "c", "V": ["p", "q"]}\n{"K": "c", "V": 3}\n')
    parquet = io.BytesIO()
    pq.write_table(pa.table({"K": ["d"], "V": ["w"], "X": [1]}), parquet)
    _put(f"{b}/in/d.parquet", parquet.getvalue())
    sources = [
        {"name": "c", "path": f"{b}/in/csv/", "format": "csv", "shard_by": "K"},
        {"name": "t", "path": f"{b}/in/*.tsv.gz", "format": "tsv", "header": False,
         "columns": ["K", "V"], "shard_by": "K"},
        {"name": "j", "path": f"{b}/in/c*.json", "format": "json", "shard_by": "K"},
        {"name": "p", "path": f"{b}/in/d.parquet", "format": "parquet", "shard_by": "K",
         "inject_source_name": "V"},
    ]  # fmt: skip
    tree = {"root": [{"type": "value", "key": "K"}, {"type": "value", "key": "V"}]}
    doc = {"shards": 2, "source": sources, "tree": tree}
    (tmp_path / "job.json").write_text(json.dumps(doc))
    store = f"{b}/store"
    first = run_load(spark, load_job(tmp_path / "job.json"), store)
    assert first.version == 1
    assert _pairs(store) == {("a", "x,1"): 1, ("b", "y"): 1, ("c", "p"): 1, ("c", "q"): 1,
                             ("c", "3"): 1, ("d", f"{b}/in/d.parquet"): 1}  # fmt: skip
    # only the new file is read; a file rewritten after its load is skipped with a warning
    _put(f"{b}/in/csv/e.csv", "K,V\ne,1\n")
    _put(f"{b}/in/c1.json", '{"K": "c", "V": 4}\n')
    lines: list[str] = []
    job = load_job(tmp_path / "job.json")
    second = run_load(spark, job, store, on_event=as_lines(lines.append))
    assert second.version == 2
    assert {n: s["read"] for n, s in second.report["sources"].items() if s.get("read")} == {"c": 1}
    assert second.report["changed_files"] == {"j": [f"{b}/in/c1.json"]}
    assert any(f"{b}/in/c1.json changed after it was loaded" in line for line in lines)
    assert _pairs(store)[("e", "1")] == 1 and ("c", "4") not in _pairs(store)
    assert run_load(spark, load_job(tmp_path / "job.json"), store).version is None
