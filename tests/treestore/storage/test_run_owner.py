"""A run says, inside its checked bytes, what it belongs to (its shard, and its store's
identity when the store has one), and readers refuse a run that belongs elsewhere: a run
copied or moved from another shard or store is never read as this shard's nodes. Runs
written before runs said so read as before. Against both page stores."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from treestore.errors import CorruptPageError, StoreError
from treestore.storage.pagestore import FilePageStore, MemoryPageStore, PageStore
from treestore.storage.reading import TreeReader
from treestore.storage.run_index import parsed_index
from treestore.storage.runs import RunReader, write_run
from treestore.storage.state import ShardState
from treestore.storage.tree import ShardTree, build_tree

PATHS = [["root", f"u{i:03d}", "A"] for i in range(40)]
_LEGACY = Path(__file__).parent / "data" / "run-index-1"


@pytest.fixture(params=["memory", "disk"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> PageStore:
    """Every test runs against the in-memory and the on-disk page store."""
    return MemoryPageStore() if request.param == "memory" else FilePageStore(tmp_path / "store")


def _names(tree: TreeReader) -> list[str]:
    top = tree.child(tree.root, "root")
    assert top is not None
    return [node.name for node in tree.children(top)]


def test_a_trees_runs_say_their_shard_and_store(store: PageStore) -> None:
    tree = build_tree(store, PATHS, shard=3, owner="store-a")
    (run,) = tree.state.runs
    index = parsed_index(store.read(f"{run}.index"))
    assert (index.shard, index.owner) == (3, "store-a")
    without = build_tree(store, PATHS, shard=4)  # a store without an identity: the shard only
    index = parsed_index(store.read(f"{without.state.runs[0]}.index"))
    assert (index.shard, index.owner) == (4, None)


def test_a_run_of_another_shard_is_refused_naming_it(store: PageStore) -> None:
    state = build_tree(store, PATHS, shard=3, owner="store-a").state
    (run,) = state.runs
    with pytest.raises(CorruptPageError) as refused:
        ShardTree(store, state, shard=5, owner="store-a")
    said = str(refused.value)
    assert said.startswith("Shard 5: the run ") and "\n" not in said
    assert f"{run}.index says it belongs to shard 3, not to shard 5" in said
    assert "from another shard" in said
    with pytest.raises(StoreError, match="belongs to shard 3"):  # a store without an id too
        TreeReader(store, state.runs, 5, state.run_sums)
    assert len(_names(ShardTree(store, state, shard=3, owner="store-a"))) == 40


def test_a_run_of_another_store_is_refused_naming_it(store: PageStore) -> None:
    state = build_tree(store, PATHS, shard=3, owner="store-a").state
    with pytest.raises(CorruptPageError) as refused:
        ShardTree(store, state, shard=3, owner="store-b")
    said = str(refused.value)
    assert "belongs to shard 3 of store store-a, not to this store (store-b)" in said
    assert "from another store" in said and "\n" not in said
    # what a reader does not know it does not compare: a reader without the store's
    # identity (a bare page store, a store made before stores had one) reads by shard
    assert len(_names(ShardTree(store, state, shard=3))) == 40
    assert RunReader(store, state.runs[0]).entries == 82  # no shard given: nothing compared


def test_runs_written_before_runs_said_so_still_read(store: PageStore) -> None:
    tree = build_tree(store, PATHS)
    reader = tree.readers[0]
    columns = reader.all_columns(with_data=True)
    chunk = (
        columns.parents,
        columns.names,
        columns.ids,
        columns.hits,
        columns.counts,
        columns.data,
    )
    old = write_run(store, "shard-0007/old-000", [chunk])  # no shard, no owner: as before
    assert parsed_index(store.read("shard-0007/old-000.index")).shard is None
    state = ShardState(
        runs=("shard-0007/old-000",),
        next_id=tree.next_id,
        nodes=40 * 2 + 1,
        run_sums={"shard-0007/old-000": old.sum},
    )
    read = ShardTree(store, state, shard=7, owner="store-a")
    assert len(_names(read)) == 40
    read.visit(read.root_handle, "more")
    again = ShardTree(store, read.commit(), shard=7, owner="store-a")
    # the old run is kept as it is, the new one says what it belongs to
    assert [parsed_index(store.read(f"{r}.index")).shard for r in again.state.runs] == [None, 7]
    assert again.child(again.root, "more") is not None


def test_a_run_of_the_first_index_format_still_reads_in_any_shard(tmp_path: Path) -> None:
    store = FilePageStore(tmp_path)
    name = "trees/shard-0002/legacy-000"
    (tmp_path / "trees" / "shard-0002").mkdir(parents=True)
    for suffix in ("pages", "index"):
        shutil.copy(f"{_LEGACY}.{suffix}", tmp_path / f"{name}.{suffix}")
    reader = RunReader(store, name, 2, owner="store-a")
    assert reader.get((0, "u0007")) is not None
