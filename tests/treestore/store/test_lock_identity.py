"""A lease names its holder by pid, process start time and boot id, so a crashed load's
lease on this host is taken over at once even when its pid now runs another process; a
lease that cannot be read is reported and taken over once nobody has rewritten it for a
whole lease; two loads racing to take a lock over never both win."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from treestore.errors import StoreError
from treestore.events import as_lines
from treestore.storage.pagestore import FilePageStore, PageStore
from treestore.store.lock import boot_id, lock_holder, process_start, store_lock

pytestmark = pytest.mark.skipif(
    process_start(os.getpid()) is None, reason="needs /proc (Linux) for process start times"
)


@pytest.fixture
def store(tmp_path: Path) -> PageStore:
    return FilePageStore(tmp_path / "store")


@pytest.fixture
def other_process() -> Iterator[int]:
    """A live process of this host that is not a treestore load (as after pid reuse)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def _plant(store: PageStore, **lease: object) -> None:
    now = time.time()
    body = {"host": socket.gethostname(), "since": now - 5, "expires": now + 600}
    store.write("locks/000001.json", json.dumps({**body, "purpose": "a load", **lease}).encode())


def _take(store: PageStore) -> list[str]:
    lines: list[str] = []
    with store_lock(store, "the next load", on_event=as_lines(lines.append)):
        assert lock_holder(store)["purpose"] == "the next load"  # type: ignore[index]
    return lines


def test_a_live_pid_that_is_another_process_now_is_taken_over(
    store: PageStore, other_process: int
) -> None:
    start = process_start(other_process)
    assert start is not None
    _plant(store, pid=other_process, start=start - 1, boot=boot_id())
    assert _take(store) == [
        f"taking over the lock of a load, which died (pid {other_process} is another process now)"
    ]


def test_a_lease_from_before_a_restart_is_taken_over(store: PageStore, other_process: int) -> None:
    _plant(store, pid=other_process, start=process_start(other_process), boot="another-boot")
    assert _take(store) == [
        f"taking over the lock of a load, which died (this host restarted since; pid "
        f"{other_process} is another process now)"
    ]


def test_the_live_holder_itself_is_refused(store: PageStore, other_process: int) -> None:
    _plant(store, pid=other_process, start=process_start(other_process), boot=boot_id())
    with pytest.raises(StoreError, match=rf"locked by a load \(pid {other_process} on host"):
        _take(store)


def test_the_lease_of_this_process_records_who_it_is(store: PageStore) -> None:
    with store_lock(store, "a load"):
        holder = lock_holder(store)
        assert holder is not None
        assert holder["pid"] == os.getpid() and holder["start"] == process_start(os.getpid())
        assert holder["boot"] == boot_id()


@pytest.mark.parametrize(
    "content", [b"\x00\x01garbage", b"[]", b'{"pid": "x", "expires": 1}', b'{"expires": 1e300}']
)
def test_a_lease_that_cannot_be_read_waits_a_lease_then_is_taken_over(
    store: PageStore, content: bytes, tmp_path: Path
) -> None:
    store.write("locks/000001.json", content)
    with pytest.raises(StoreError) as refused:
        _take(store)
    message = str(refused.value)
    assert "locks/000001.json cannot be read" in message and "\n" not in message
    assert "if none is running, the next load takes the lock over at" in message
    lease = tmp_path / "store" / "locks" / "000001.json"
    old = time.time() - 120  # nobody rewrote it for longer than a lease
    os.utime(lease, (old, old))
    lines = _take(store)
    assert len(lines) == 1
    assert lines[0].startswith("taking over the lock of a load, whose lease locks/000001.json")
    unchanged = re.search(r"cannot be read .* has not changed for (\d+) s$", lines[0])
    assert unchanged, lines[0]
    assert 120 <= int(unchanged[1]) < 3600  # 120 s and the time this test took (no timing)


def test_of_loads_racing_to_take_over_a_dead_lease_one_wins(
    store: PageStore, tmp_path: Path
) -> None:
    store.write("locks/000001.json", b"garbage")
    old = time.time() - 120
    os.utime(tmp_path / "store" / "locks" / "000001.json", (old, old))
    contenders = 4
    start, held = threading.Barrier(contenders), threading.Event()
    outcomes: list[str] = []

    def note(outcome: str) -> None:
        outcomes.append(outcome)
        if len(outcomes) == contenders:  # every racer has tried: the winner may let go
            held.set()

    def contend() -> None:
        start.wait()
        try:
            with store_lock(FilePageStore(tmp_path / "store"), "a racer"):
                note("won")
                held.wait(120)  # hold it until every other racer has tried (no timing)
        except StoreError as exc:
            note(str(exc))

    threads = [threading.Thread(target=contend) for _ in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("won") == 1, outcomes
    assert all("is locked by a racer" in o for o in outcomes if o != "won"), outcomes
