"""Input files keep their identity when a store and its inputs move, are copied, or are
mounted elsewhere: a file is known by its source, its path relative to the source's
root, its size, its modification time and a content fingerprint.

One Spark load is shared (read only) by the tests; each copies its folder (job, inputs,
store) and loads again, which costs no Spark job while nothing is new."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import treestore
from loaders import load_job, run_load
from loaders.job.model import SourceSpec
from loaders.listing.files import InputFile, list_input_files
from loaders.listing.identity import fingerprint, input_key, location_of, scan_inputs
from loaders.load.precheck import precheck_load
from tests.support.old_stores import as_before_sealing
from treestore.events import as_lines
from treestore.storage.pagestore import page_store_for
from treestore.store.versions import current_version, open_version

PLAIN = "K\tV\na\t1\nb\t2\n"  # a source without dedup: loading it twice doubles its hits
KEYED = "K\tV\nk\t1\nm\t2\n"


def _write_job(folder: Path) -> Path:
    doc = {
        "shards": 2,
        "source": [
            {"name": "plain", "path": "in/plain/", "format": "tsv", "shard_by": "K"},
            {
                "name": "keyed",
                "path": "in/keyed/*.tsv",
                "format": "tsv",
                "shard_by": "K",
                "dedup": {"keys": ["K", "V"]},
            },
        ],
        "tree": {"root": [{"type": "value", "key": "K"}, {"type": "value", "key": "V"}]},
    }
    (folder / "job.json").write_text(json.dumps(doc))
    return folder / "job.json"


@pytest.fixture(scope="module")
def loaded(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a job, its inputs (``in/``) and a store that loaded them once."""
    folder = tmp_path_factory.mktemp("identity") / "site"
    (folder / "in" / "plain" / "day1").mkdir(parents=True)
    (folder / "in" / "keyed").mkdir(parents=True)
    (folder / "in" / "plain" / "day1" / "a.tsv").write_text(PLAIN)
    (folder / "in" / "plain" / "b.tsv").write_text("K\tV\nc\t3\n")
    (folder / "in" / "keyed" / "k.tsv").write_text(KEYED)
    run_load(spark, load_job(_write_job(folder)), folder / "store")
    return folder


def _copy(loaded: Path, to: Path) -> Path:
    """A copy of the loaded folder that keeps modification times (``cp -p``)."""
    shutil.copytree(loaded, to, copy_function=shutil.copy2)
    return to


def _load(spark: Any, folder: Path, **options: Any) -> tuple[Any, list[str]]:
    lines: list[str] = []
    result = run_load(
        spark, load_job(folder / "job.json"), folder / "store", as_lines(lines.append), **options
    )
    return result, lines


def _hits(folder: Path) -> dict[tuple[str, str], int]:
    rows = treestore.open(folder / "store").query("+/+:+hits").to_list()
    return {(k, v): hits for k, v, hits in rows}  # type: ignore[misc]


EXPECTED_HITS = {("a", "1"): 1, ("b", "2"): 1, ("c", "3"): 1, ("k", "1"): 1, ("m", "2"): 1}


def test_a_load_records_files_by_source_and_path_under_the_root(loaded: Path) -> None:
    inputs = open_version(loaded / "store").manifest.inputs
    assert sorted(inputs) == ["keyed/k.tsv", "plain/b.tsv", "plain/day1/a.tsv"]
    entry = inputs["plain/day1/a.tsv"]
    root = str((loaded / "in" / "plain").resolve())
    assert (entry["root"], entry["relative"], entry["records"]) == (root, "day1/a.tsv", 2)
    assert entry["fingerprint"] == fingerprint(f"{root}/day1/a.tsv", len(PLAIN))
    assert inputs["keyed/k.tsv"]["root"] == str((loaded / "in" / "keyed").resolve())


def test_a_moved_store_and_inputs_read_nothing_and_say_the_root_changed(
    spark: Any, loaded: Path, tmp_path: Path
) -> None:
    moved = _copy(loaded, tmp_path / "elsewhere")  # moved, or mounted at another path
    result, lines = _load(spark, moved)
    assert result.version is None and lines[-1] == "nothing new to load: the store is unchanged"
    old, new = (loaded / "in" / "plain").resolve(), (moved / "in" / "plain").resolve()
    assert (
        f"warning: source plain: its files were loaded from {old} and are now under {new}: they "
        "are matched by their path relative to it (2 file(s) already loaded)"
    ) in lines
    assert sum("are now under" in line for line in lines) == 2  # one per source
    assert _hits(moved) == EXPECTED_HITS
    said: list[str] = []  # the command line says the same before Spark starts
    assert not precheck_load(load_job(moved / "job.json"), moved / "store", as_lines(said.append))
    assert said == lines


def test_copies_with_new_modification_times_are_known_by_their_fingerprint(
    spark: Any, loaded: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"  # cp -r without -p: every file has a new modification time
    shutil.copytree(loaded, copy, copy_function=shutil.copyfile)
    a_file = copy / "in" / "plain" / "day1" / "a.tsv"
    os.utime(a_file, ns=(1, 1))
    result, lines = _load(spark, copy)
    assert result.version is None and result.report["changed_files"] == {}
    assert not [line for line in lines if "changed after it was loaded" in line]
    assert _hits(copy) == EXPECTED_HITS


def test_same_size_edits(spark: Any, loaded: Path, tmp_path: Path) -> None:
    folder = _copy(loaded, tmp_path / "site")
    a_file = folder / "in" / "plain" / "day1" / "a.tsv"
    stat = a_file.stat()
    # a new modification time and another content: the fingerprint tells, as before
    a_file.write_text(PLAIN.replace("b\t2", "z\t9"))
    result, lines = _load(spark, folder)
    assert result.version is None and result.report["changed_files"] == {"plain": [str(a_file)]}
    assert any(line.startswith(f"warning: {a_file} changed after it was loaded") for line in lines)
    # the same size and modification time: known without reading it, so not noticed (as
    # make and rsync do; documented in loaders.listing.identity)
    os.utime(a_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    result, lines = _load(spark, folder)
    assert result.version is None and result.report["changed_files"] == {}


def test_the_next_version_records_the_new_root_and_the_dedup_rebuild_finds_moved_files(
    spark: Any, loaded: Path, tmp_path: Path
) -> None:
    folder = _copy(loaded, tmp_path / "before").rename(tmp_path / "after")
    shutil.rmtree(folder / "store" / "dedup")  # rebuilt from the loaded files, moved
    (folder / "in" / "keyed" / "n.tsv").write_text("K\tV\nk\t1\nn\t5\n")  # k 1 was loaded
    os.symlink("gone.tsv", folder / "in" / "keyed" / "o.tsv")  # said, and skipped
    result, lines = _load(spark, folder)
    assert result.version == 2
    assert lines[0].startswith(f"warning: source 'keyed': {folder}/in/keyed/o.tsv is a symbolic")
    assert [s["files"] for s in result.report["sources"].values()] == [0, 1]
    assert result.report["sources"]["keyed"]["duplicates_of_earlier_loads"] == 1
    assert any("rebuilding it from 1 loaded file(s)" in line for line in lines)
    assert _hits(folder) == {**EXPECTED_HITS, ("n", "5"): 1}
    inputs = open_version(folder / "store").manifest.inputs
    assert {e["root"] for e in inputs.values()} == {
        str((folder / "in" / name).resolve()) for name in ("plain", "keyed")
    }
    assert inputs["plain/day1/a.tsv"]["version"] == 1  # the new root, the same load
    result, lines = _load(spark, folder)
    assert result.version is None and not [line for line in lines if "are now under" in line]


def _to_the_old_form(store: Path, moved_from: Path) -> None:
    """Rewrite the store's manifest as treestore wrote it before: inputs keyed by absolute
    path, without root, relative path or fingerprint, and no checksum (its inputs' roots:
    under the store's folder, not ``moved_from``)."""
    pages = page_store_for(store)
    was, now = str(moved_from.resolve()), str(store.parent.resolve())

    def keyed_by_path(doc: dict[str, Any]) -> None:
        doc["inputs"] = {
            location_of(key, entry).replace(was, now, 1): {
                k: v for k, v in entry.items() if k not in ("root", "relative", "fingerprint")
            }
            for key, entry in doc["inputs"].items()
        }

    as_before_sealing(pages, current_version(pages), keyed_by_path)


def test_a_store_of_the_old_form_still_knows_its_files(
    spark: Any, loaded: Path, tmp_path: Path
) -> None:
    folder = _copy(loaded, tmp_path / "old")
    _to_the_old_form(folder / "store", loaded)
    a_file = folder / "in" / "plain" / "day1" / "a.tsv"
    assert str(a_file.resolve()) in open_version(folder / "store").manifest.inputs
    result, lines = _load(spark, folder)
    assert result.version is None and lines[-1] == "nothing new to load: the store is unchanged"
    os.utime(a_file, ns=(1, 1))  # no fingerprint recorded: a new time is a change, as before
    result, lines = _load(spark, folder)
    assert result.version is None and result.report["changed_files"] == {"plain": [str(a_file)]}


def _entry(root: str, relative: str, **fields: Any) -> dict[str, Any]:
    return {"source": "s", "root": root, "relative": relative, "size": 3, "mtime_ns": 5,
            "records": 1, "version": 1, **fields}  # fmt: skip


def test_matching_by_key_then_by_location_without_reading_files(tmp_path: Path) -> None:
    """A pure check of the rules: old entries by absolute path, a renamed source's files
    by where they are, and no fingerprint taken unless the modification time moved."""
    source = SourceSpec(name="s", path=str(tmp_path), format="tsv")
    root = str(tmp_path)
    inputs = {
        input_key("s", "a.tsv"): _entry("/old/root", "a.tsv", fingerprint="never-compared"),
        f"{root}/b.tsv": {"source": "s", "size": 3, "mtime_ns": 5, "records": 1, "version": 1},
        input_key("renamed", "c.tsv"): _entry(root, "c.tsv"),
    }
    listed = [InputFile(f"{root}/{name}", 3, 5, name, root) for name in ("a.tsv", "b.tsv", "c.tsv")]
    lines: list[str] = []
    scan = scan_inputs([source], [listed], inputs, lines.append, False)
    assert scan.fresh == {} and scan.changed == {}  # no file exists: none was read
    assert scan.keys == {
        (0, f"{root}/a.tsv"): "s/a.tsv",
        (0, f"{root}/b.tsv"): f"{root}/b.tsv",  # an old entry keeps its key
        (0, f"{root}/c.tsv"): "renamed/c.tsv",
    }
    assert scan.refreshed == {"s/a.tsv": {**inputs["s/a.tsv"], "root": root}}
    assert lines[0].startswith(
        f"warning: source s: its files were loaded from /old/root and are now under {root}"
    )


def test_files_at_a_uri_have_the_same_roots_relative_paths_and_fingerprints(
    s3_bucket: str,
) -> None:
    from treestore.filesystems import open_location

    for name in ("in/a.tsv", "in/deep/b.tsv"):
        filesystem, path = open_location(f"{s3_bucket}/{name}")
        with filesystem.open_output_stream(path, compression=None) as out:
            out.write(PLAIN.encode())

    def listed(path: str) -> list[tuple[str, str]]:
        files = list_input_files(SourceSpec(name="s", path=path, format="tsv"))
        return [(f.root, f.relative) for f in files]

    root = f"{s3_bucket}/in"
    assert listed(f"{root}/") == [(root, "a.tsv"), (root, "deep/b.tsv")]
    assert listed(f"{root}/**/*.tsv") == [(root, "a.tsv"), (root, "deep/b.tsv")]
    assert listed(f"{root}/deep/b.tsv") == [(f"{root}/deep", "b.tsv")]
    assert fingerprint(f"{root}/a.tsv", len(PLAIN)) == fingerprint(f"{root}/deep/b.tsv", len(PLAIN))
