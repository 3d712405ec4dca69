"""Before a load publishes, the driver confirms that every file its tasks wrote is there
with the size they reported, by listing folders (no file is read), and otherwise fails
in one line naming the first missing file and the likely cause. A failed load whose
message names such a file still removes what it wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from treestore.errors import LoadError
from treestore.storage.pagestore import FilePageStore, MemoryPageStore, PageStore
from treestore.storage.state import SideFiles
from treestore.storage.tree import ShardTree
from treestore.store.layout import tree_folder
from treestore.store.lock import store_lock
from treestore.store.maintenance import check_store
from treestore.store.versions import StoreWriter, current_version
from treestore.store.written import FOLDERS_PER_LISTING, confirm_written, written_files

REPORT = {"sources": {}, "started": "2025-01-01 00:00:00", "seconds": 1.0}


class CountingStore(MemoryPageStore):
    """A page store that counts its listings, lookups and reads."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {"sizes": 0, "exists": 0, "read": 0}

    def sizes(self, prefix: str = "") -> dict[str, int]:
        self.calls["sizes"] += 1
        return super().sizes(prefix)

    def exists(self, name: str) -> bool:
        self.calls["exists"] += 1
        return super().exists(name)

    def read(self, name: str) -> bytes:
        self.calls["read"] += 1
        return super().read(name)

    def read_range(self, name: str, offset: int, length: int) -> bytes:
        self.calls["read"] += 1
        return super().read_range(name, offset, length)


class CountingFiles(FilePageStore):
    """A local store that counts its listings."""

    listings = 0

    def sizes(self, prefix: str = "") -> dict[str, int]:
        self.listings += 1
        return super().sizes(prefix)


@pytest.fixture(params=["memory", "disk"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> PageStore:
    return MemoryPageStore() if request.param == "memory" else FilePageStore(tmp_path / "store")


def _written(pages: PageStore, shards: int) -> dict[str, int | None]:
    files: dict[str, int | None] = {}
    for shard in range(shards):
        for name, data in ((f"{tree_folder(shard)}/r-000.pages", b"p" * (10 + shard)),):
            pages.write(name, data)
            files[name] = len(data)
    pages.write("dedup/src/shard-0000/d.arrow", b"arrow")
    pages.write("rejected/stamp/part-0.jsonl", b"{}\n")
    return {**files, "dedup/src/shard-0000/d.arrow": 5, "rejected/stamp/part-0.jsonl": None}


def test_files_where_the_tasks_said_pass(store: PageStore) -> None:
    confirm_written(store, _written(store, 3))
    confirm_written(store, {})


def test_the_first_missing_file_is_named_with_the_likely_cause(store: PageStore) -> None:
    files = _written(store, 3)
    store.delete(f"{tree_folder(2)}/r-000.pages")
    store.delete(f"{tree_folder(1)}/r-000.pages")
    with pytest.raises(LoadError) as failed:
        confirm_written(store, files)
    said = str(failed.value)
    assert said.startswith(f"{store.location}/{tree_folder(1)}/r-000.pages, which a task")
    assert "is missing: the executors wrote it where the driver cannot see it" in said
    assert "(HDFS, S3, NFS)" in said and "Nothing was published" in said and "\n" not in said


def test_a_file_of_another_size_is_named_with_both_sizes(store: PageStore) -> None:
    files = _written(store, 2)
    store.write("dedup/src/shard-0000/d.arrow", b"arr")
    with pytest.raises(LoadError, match=r"d\.arrow is 3 bytes, but the task that wrote it "):
        confirm_written(store, files)
    confirm_written(store, {**files, "dedup/src/shard-0000/d.arrow": None})  # size unknown


def test_folders_are_listed_once_and_no_file_is_read() -> None:
    pages = CountingStore()
    files = _written(pages, 3)
    confirm_written(pages, files)
    # a listing per folder: three shards' folders, the dedup one and the rejected one
    assert pages.calls == {"sizes": 5, "exists": 0, "read": 0}
    many = CountingStore()
    files = _written(many, FOLDERS_PER_LISTING + 1)
    confirm_written(many, files)
    # more shards than that: trees/ is listed once, not each shard's folder (a store that
    # is not local: a listing is a round trip)
    assert many.calls == {"sizes": 3, "exists": 0, "read": 0}
    many.delete(f"{tree_folder(0)}/r-000.pages")
    with pytest.raises(LoadError):
        confirm_written(many, files)
    assert many.calls["exists"] == 1 and many.calls["read"] == 0  # the missing one looked up


def test_a_local_store_lists_each_folder(tmp_path: Path) -> None:
    """A local listing costs by the files it sees: the shards' folders, not all of trees/."""
    pages = CountingFiles(tmp_path / "store")
    files = _written(pages, FOLDERS_PER_LISTING + 1)
    pages.write(f"{tree_folder(99)}/an-old-run.pages", b"old")
    confirm_written(pages, files)
    assert pages.listings == FOLDERS_PER_LISTING + 1 + 2


def test_the_new_files_of_a_version_are_its_new_runs_and_side_files(tmp_path: Path) -> None:
    pages = FilePageStore(tmp_path / "store")
    with store_lock(pages, "a test"):
        writer = StoreWriter(pages, shards=2)
        first = ShardTree(pages, shard=0, folder=tree_folder(0))
        first.visit(first.root_handle, "a")
        base = writer.publish({0: first.commit()}, {}, REPORT)
        tree = ShardTree(pages, base.trees[0], shard=0, folder=tree_folder(0))
        tree.visit(tree.root_handle, "b")
        side = f"{tree_folder(0)}/side.arrow"
        pages.write(side, b"side file")
        state = tree.commit(side={"pending": SideFiles((side,))})
    files = written_files(base, {0: state})
    new_runs = [r for r in state.runs if r not in base.trees[0].runs]
    assert new_runs and files == {
        **{f"{r}.pages": state.run_sums[r].pages_bytes for r in new_runs},
        **{f"{r}.index": state.run_sums[r].index_bytes for r in new_runs},
        side: len(b"side file"),
    }
    assert all(pages.size(name) == size for name, size in files.items())


def test_a_failed_load_naming_a_tree_file_still_removes_what_it_wrote(tmp_path: Path) -> None:
    pages = FilePageStore(tmp_path / "store")
    with store_lock(pages, "the first load"):
        writer = StoreWriter(pages, shards=1)
        tree = ShardTree(pages, shard=0, folder=tree_folder(0))
        tree.visit(tree.root_handle, "old")
        writer.publish({0: tree.commit()}, {}, REPORT)
    before = sorted(pages.list("trees"))
    with pytest.raises(LoadError), store_lock(pages, "a load"):
        writer = StoreWriter(pages, shards=1)
        tree = ShardTree(pages, writer.base.trees[0], shard=0, folder=tree_folder(0))
        tree.visit(tree.root_handle, "new")
        files = written_files(writer.base, {0: tree.commit()})
        pages.delete(min(files))  # the executors wrote it where the driver cannot see it
        confirm_written(pages, files)
    assert sorted(pages.list("trees")) == before  # the run's other file went too
    assert current_version(pages) == 1 and check_store(pages) == []


@pytest.mark.s3
def test_a_store_on_s3_lists_the_parent_of_many_folders(s3_bucket: str) -> None:
    """On S3 a listing is a round trip (of up to 1,000 names): trees/ is listed once."""
    pages = CountingFiles(f"{s3_bucket}/stores/one")
    files = _written(pages, FOLDERS_PER_LISTING + 1)
    confirm_written(pages, files)
    assert pages.listings == 3
    pages.delete(f"{tree_folder(4)}/r-000.pages")
    with pytest.raises(LoadError, match=r"stores/one/trees/shard-0004/r-000\.pages, which"):
        confirm_written(pages, files)
