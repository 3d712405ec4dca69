"""The store's lock and publishing are exclusive on a local folder and on S3 alike: two
writers racing can never both win, and a dead holder's lock is taken over."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from treestore.errors import StoreError
from treestore.events import as_lines
from treestore.storage.pagestore import PageStore, page_store_for
from treestore.storage.state import ShardState
from treestore.store.layout import manifest_name
from treestore.store.lock import lock_holder, store_lock
from treestore.store.versions import StoreWriter, current_version


@pytest.fixture(params=["folder", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> PageStore:
    """An empty store location: a local folder, or a prefix in a bucket on the S3 server."""
    if request.param == "folder":
        return page_store_for(tmp_path / "store")
    bucket = request.getfixturevalue("s3_bucket")
    return page_store_for(f"{bucket}/stores/one")


def _race(store: PageStore, contenders: int = 4) -> list[str]:
    """Start ``contenders`` threads taking the lock at once; what each one got."""
    start = threading.Barrier(contenders)
    outcomes: list[str] = []
    held = threading.Event()

    def note(outcome: str) -> None:
        outcomes.append(outcome)
        if len(outcomes) == contenders:  # every racer has tried: the winner may let go
            held.set()

    def contend() -> None:
        start.wait()
        try:
            with store_lock(page_store_for(store.location), "a racer"):
                note("won")  # the others may all have been refused already
                held.wait(120)  # hold it until every other racer has tried (no timing)
        except StoreError as exc:
            note(f"refused: {exc}")

    threads = [threading.Thread(target=contend) for _ in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_of_racing_loads_exactly_one_takes_the_lock(store: PageStore) -> None:
    for _ in range(5):
        outcomes = _race(store)
        assert outcomes.count("won") == 1, outcomes
        assert all("is locked by a racer" in o for o in outcomes if o != "won")
        assert lock_holder(store) is None  # released at the end


def _plant_lease(store: PageStore, **holder: object) -> None:
    body = {"pid": 1, "host": "elsewhere", "since": time.time() - 100, "purpose": "a load"}
    store.write("locks/000001.json", json.dumps({**body, **holder}).encode())


def test_a_live_lease_refuses_and_an_expired_one_is_taken_over(store: PageStore) -> None:
    _plant_lease(store, expires=time.time() + 3600)  # an hour: no run is that slow
    refused = pytest.raises(StoreError, match=r"locked by a load \(pid 1 on host elsewhere\)")
    with refused, store_lock(store, "gc"):
        pass
    _plant_lease(store, expires=time.time() - 1)  # its holder stopped renewing
    lines: list[str] = []
    with store_lock(store, "gc", on_event=as_lines(lines.append)):
        assert lock_holder(store)["purpose"] == "gc"  # type: ignore[index]
    assert lines == [
        "taking over the lock of a load, whose lease ran out (pid 1 on host elsewhere)"
    ]


def _expiry(store: PageStore) -> float:
    holder = lock_holder(store)
    assert holder is not None
    return float(holder["expires"])


def test_a_holder_renews_its_lease_and_a_stalled_one_cannot_publish(
    store: PageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TREESTORE_LOCK_LEASE_SECONDS", "0.4")
    with store_lock(store, "a slow load") as lease:
        first = _expiry(store)
        # renewed in the background (every tenth of a second here): its expiry moves on,
        # however long the machine takes to run the renewer (no timing assumed)
        deadline = time.monotonic() + 120
        while _expiry(store) == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _expiry(store) > first
        lease.verify()
        # another process takes the lock over (as if this one had stalled past its lease)
        store.write("locks/000002.json", json.dumps({"purpose": "x"}).encode())
        writer = StoreWriter(store, 2, fence=lease.verify)
        with pytest.raises(StoreError, match="lost the lock"):
            writer.publish({0: ShardState()}, {}, {})
    assert current_version(store) == 0


def test_two_writers_publishing_the_same_version_never_both_win(store: PageStore) -> None:
    first, second = StoreWriter(store, 2), StoreWriter(store, 2)
    first.publish({0: ShardState()}, {"a": {}}, {})
    with pytest.raises(StoreError, match="Another process published version 1"):
        second.publish({1: ShardState()}, {"b": {}}, {})
    assert current_version(store) == 1
    assert json.loads(store.read(manifest_name(1)))["inputs"] == {"a": {}}


def test_a_manifest_a_killed_load_left_unpublished_is_dropped(store: PageStore) -> None:
    writer = StoreWriter(store, 2)
    writer.publish({0: ShardState()}, {}, {})
    store.write(manifest_name(2), b"{}")  # a load killed between manifest and CURRENT
    with store_lock(store, "the next load"):
        again = StoreWriter(store, 2)
        assert again.drop_unpublished() == [2]
        assert again.publish({1: ShardState()}, {}, {}).version == 2
