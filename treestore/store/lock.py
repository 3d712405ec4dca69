"""The store's lock: one load (or gc) at a time writes a store, on any filesystem.

The lock is a series of lease files, ``locks/000001.json``, ``locks/000002.json``,
...; the newest one says who holds the store: pid, host, purpose, since when, and
until when its lease runs. Taking the lock is creating the next number
*exclusively* (:meth:`~treestore.storage.pagestore.PageStore.create`: a hard link
on a local filesystem, a conditional write on S3), so two loads racing for it can
never both win, on object stores too. The holder renews its lease in the background
and marks the file released when it is done.

A lock whose holder died is taken over: at once when the holder ran on this host and
its pid is gone, otherwise when its lease has run out (:data:`LEASE_SECONDS`, or
``TREESTORE_LOCK_LEASE_SECONDS``). Before publishing, a load checks it still holds
the newest lease (:meth:`Lease.verify`), and the version's manifest is created
exclusively too, so a holder that stalled past its lease cannot publish over the
load that took over.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from treestore.errors import StoreError
from treestore.events import EventSink, Message, ignore_events
from treestore.settings import env_number
from treestore.storage.pagestore import (
    PageStore,
    is_new_folder,
    remove_if_unpublished,
    require_folder,
)

__all__ = ["LEASE_SECONDS", "LOCKS_FOLDER", "Lease", "lock_holder", "store_lock"]

LOCKS_FOLDER = "locks"
LEASE_SECONDS = 60.0
"""How long a lock outlives its holder's last renewal."""
_KEPT_LEASE_FILES = 3


def _lease_name(number: int) -> str:
    return f"{LOCKS_FOLDER}/{number:06d}.json"


def _lease_numbers(store: PageStore) -> list[int]:
    numbers = []
    for name in store.list(LOCKS_FOLDER):
        stem = name.rsplit("/", 1)[-1].removesuffix(".json")
        if stem.isdigit():
            numbers.append(int(stem))
    return sorted(numbers)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_holder(store: PageStore) -> dict[str, Any] | None:
    """Who holds the store's lock now (the newest lease, unless released), or None."""
    numbers = _lease_numbers(store)
    if not numbers:
        return None
    try:
        holder = json.loads(store.read(_lease_name(numbers[-1])))
    except (StoreError, ValueError):
        return {"number": numbers[-1]}
    if holder.get("released"):
        return None
    return {**holder, "number": numbers[-1]}


class Lease:
    """A held lock: renewed in the background until released."""

    def __init__(self, store: PageStore, number: int, body: dict[str, Any], seconds: float):
        self.store, self.number, self.body, self.seconds = store, number, body, seconds
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew, daemon=True, name="treestore-lease")
        self._renewer.start()

    def _write(self, **changes: Any) -> None:
        self.body = {**self.body, **changes}
        self.store.write(_lease_name(self.number), json.dumps(self.body).encode())

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 4):
            with contextlib.suppress(StoreError):  # the next renewal tries again
                self._write(expires=time.time() + self.seconds)

    def verify(self) -> None:
        """Raise unless this lease is still the newest one (nobody took the lock over)."""
        numbers = _lease_numbers(self.store)
        if numbers and numbers[-1] != self.number:
            raise StoreError(
                f"This process lost the lock of {self.store.location}: another process took it "
                "over (this one stalled past its lease). Nothing of this run was published."
            )

    def release(self) -> None:
        """Mark the lease released and remove older lease files."""
        self._stop.set()
        self._renewer.join()
        self._write(released=True, expires=time.time())
        for number in _lease_numbers(self.store):
            if number <= self.number - _KEPT_LEASE_FILES:
                self.store.delete(_lease_name(number))


def _refusal(store: PageStore, holder: dict[str, Any]) -> StoreError:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0)))
    until = time.strftime("%H:%M:%S", time.localtime(holder.get("expires", 0)))
    return StoreError(
        f"The store {store.location} is locked by {holder.get('purpose', 'another process')} "
        f"(pid {holder.get('pid', '?')} on host {holder.get('host', '?')}) since {since}. "
        f"Wait for it to finish; if it died, its lease runs out at {until} and the next "
        "load takes the lock over."
    )


def _stale_reason(holder: dict[str, Any], host: str) -> str | None:
    """Why the lock of ``holder`` may be taken over, or None if it is alive."""
    pid = holder.get("pid")
    if holder.get("host") == host and isinstance(pid, int) and not _pid_alive(pid):
        return f"which died (pid {pid})"
    if float(holder.get("expires", 0)) < time.time():
        return f"whose lease ran out (pid {pid} on host {holder.get('host', '?')})"
    return None


@contextmanager
def store_lock(
    store: PageStore, purpose: str, on_event: EventSink = ignore_events
) -> Iterator[Lease]:
    """Hold the store's lock for a load or a gc; refuse at once if someone else holds it.

    A lock whose holder died is taken over (with a message). Yields the :class:`Lease`.
    A store folder that the block created and left without a published version is
    removed afterwards; a location that is a file is refused before anything is created.
    """
    require_folder(store)  # a file there: one line, nothing created
    new_folder = is_new_folder(store)
    seconds = float(env_number("TREESTORE_LOCK_LEASE_SECONDS", LEASE_SECONDS))
    host = socket.gethostname()
    numbers = _lease_numbers(store)
    newest = numbers[-1] if numbers else 0
    holder = lock_holder(store)
    if holder is not None:
        reason = _stale_reason(holder, host)
        if reason is None:
            raise _refusal(store, holder)
        on_event(Message(f"taking over the lock of {holder.get('purpose', 'a load')}, {reason}"))
    now = time.time()
    body = {
        "pid": os.getpid(),
        "host": host,
        "since": now,
        "expires": now + seconds,
        "purpose": purpose,
        "id": uuid.uuid4().hex,
    }
    if not store.create(_lease_name(newest + 1), json.dumps(body).encode()):
        raced = lock_holder(store) or {}
        raise _refusal(store, raced)
    lease = Lease(store, newest + 1, body, seconds)
    try:
        yield lease
    finally:
        lease.release()
        if new_folder:  # a failed first load leaves no folder behind
            remove_if_unpublished(store)
