"""The store's lock: one load (or gc, or sweep) at a time writes a store, on any filesystem.

The lock is a series of lease files, ``locks/000001.json``, ``locks/000002.json``,
...; the newest one says who holds the store: pid, host, purpose, since when, and
until when its lease runs. Taking the lock is creating the next number
*exclusively* (:meth:`~treestore.storage.pagestore.PageStore.create`: a hard link
on a local filesystem, a conditional write on S3), so two loads racing for it can
never both win, on object stores too. The holder renews its lease in the background
and marks the file released when it is done.

A lock whose holder died is taken over: at once when the holder ran on this host and
is gone (its pid is not running, or runs another process: a lease records its holder's
start time, ``/proc/<pid>/stat`` field 22, and the host's boot id, so a pid reused
after a crash or a restart is told apart), otherwise when its lease has run out
(:data:`LEASE_SECONDS`, or ``TREESTORE_LOCK_LEASE_SECONDS``). A newest lease that
cannot be read may be a live holder's lease being rewritten on a filesystem without
atomic writes, so it counts as held until it has stayed unchanged (by its file's
modification time) for a whole lease: a live holder rewrites it every quarter lease.
Whatever the reason for a takeover, it is the exclusive creation of the next lease, so
of two loads racing to take over one wins. Before publishing, a load checks it still
holds the newest lease (:meth:`Lease.verify`), and the version's manifest is created
exclusively too, so a holder that stalled past its lease cannot publish over the
load that took over.

A block that fails with an exception while holding the lock (a load that failed cleanly:
disk full, too many rejected records, a failed Spark job) removes what it wrote before
letting go (:func:`~treestore.store.maintenance.remove_partial_files`): never a file a
published version uses, nor the rejected records its error message points to.
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
from treestore.storage.pagestore import FilePageStore, PageStore, require_folder
from treestore.store.layout import CONFIG, CURRENT, LOCKS, REJECTED, lease_name, number_of
from treestore.store.maintenance import remove_partial_files

__all__ = [
    "LEASE_SECONDS",
    "Lease",
    "boot_id",
    "check_unlocked",
    "lock_holder",
    "process_start",
    "store_lock",
]

LEASE_SECONDS = 60.0
"""How long a lock outlives its holder's last renewal."""
_KEPT_LEASE_FILES = 3


def _lease_numbers(pages: PageStore) -> list[int]:
    return sorted(n for n in map(number_of, pages.list(LOCKS)) if n is not None)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot: field 22 of
    ``/proc/<pid>/stat``), or None where there is no such file (not Linux, or no process).

    >>> process_start(os.getpid()) == process_start(os.getpid())
    True
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except (OSError, ValueError):
        return None
    fields = data.rsplit(b")", 1)[-1].split()  # the name (field 2) may hold spaces and ')'
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def boot_id() -> str | None:
    """This host's boot id (changes at every restart), or None where there is none."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as found:
            return found.read().strip() or None
    except OSError:
        return None


def _garbage(holder: Any) -> str | None:
    """What is wrong with a lease's content, or None if it reads as a lease."""
    if not isinstance(holder, dict):
        return f"it holds a JSON {type(holder).__name__}, not a lease"
    for key, kinds in (("pid", int), ("since", (int, float)), ("expires", (int, float))):
        value = holder.get(key, 0)
        if not isinstance(value, kinds) or isinstance(value, bool) or not 0 <= value < 1e11:
            return f"its {key} is {str(value)[:40]!r}"
    if "expires" not in holder and not holder.get("released"):
        return "it has no expiry"
    return None


_GARBAGE_READS = 3
"""How many times a lease that reads as garbage is read before it is taken as such (a
lease read while its holder renewed it was seen to read as garbage on the S3 test server)."""


def lock_holder(pages: PageStore) -> dict[str, Any] | None:
    """Who holds the store's lock now (the newest lease, unless released), or None.

    A lease that cannot be read comes back as ``{"number": N, "garbage": why}``.
    """
    numbers = _lease_numbers(pages)
    if not numbers:
        return None
    for attempt in range(_GARBAGE_READS):
        try:
            holder = json.loads(pages.read(lease_name(numbers[-1])))
            why = _garbage(holder)
        except (StoreError, ValueError) as exc:
            why = f"it is not JSON ({str(exc)[:80]})"
        if why is None:
            break
        if attempt + 1 < _GARBAGE_READS:
            time.sleep(0.05)  # read again: a lease being renewed may read as garbage
    if why is not None:
        return {"number": numbers[-1], "garbage": why}
    if holder.get("released"):
        return None
    return {**holder, "number": numbers[-1]}


class Lease:
    """A held lock: renewed in the background until released."""

    def __init__(self, pages: PageStore, number: int, body: dict[str, Any], seconds: float):
        self.pages, self.number, self.body, self.seconds = pages, number, body, seconds
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew, daemon=True, name="treestore-lease")
        self._renewer.start()

    def _write(self, **changes: Any) -> None:
        self.body = {**self.body, **changes}
        self.pages.write(lease_name(self.number), json.dumps(self.body).encode())

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 4):
            with contextlib.suppress(StoreError):  # the next renewal tries again
                self._write(expires=time.time() + self.seconds)

    def verify(self) -> None:
        """Raise unless this lease is still the newest one (nobody took the lock over)."""
        numbers = _lease_numbers(self.pages)
        if numbers and numbers[-1] != self.number:
            raise StoreError(
                f"This process lost the lock of {self.pages.location}: another process took it "
                "over (this one stalled past its lease). Nothing of this run was published."
            )

    def release(self) -> None:
        """Mark the lease released and remove older lease files."""
        self._stop.set()
        self._renewer.join()
        self._write(released=True, expires=time.time())
        for number in _lease_numbers(self.pages):
            if number <= self.number - _KEPT_LEASE_FILES:
                self.pages.delete(lease_name(number))


def _refusal(
    pages: PageStore, holder: dict[str, Any], seconds: float = LEASE_SECONDS
) -> StoreError:
    if "garbage" in holder:
        name = f"{pages.location}/{lease_name(holder['number'])}"
        changed = pages.modified(lease_name(holder["number"]))
        when = (
            f"the next load takes the lock over at "
            f"{time.strftime('%H:%M:%S', time.localtime(changed + seconds))}"
            if changed is not None
            else "remove the file"
        )
        return StoreError(
            f"The store {pages.location} may be locked: its newest lease {name} cannot be read "
            f"({holder['garbage']}). A load that holds it rewrites it every {seconds / 4:g} s; "
            f"if none is running, {when}."
        )
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0)))
    until = time.strftime("%H:%M:%S", time.localtime(holder.get("expires", 0)))
    return StoreError(
        f"The store {pages.location} is locked by {holder.get('purpose', 'another process')} "
        f"(pid {holder.get('pid', '?')} on host {holder.get('host', '?')}) since {since}. "
        f"Wait for it to finish; if it died, its lease runs out at {until} and the next "
        "load takes the lock over."
    )


def _stale_reason(
    pages: PageStore, holder: dict[str, Any], host: str, seconds: float
) -> str | None:
    """Why the lock of ``holder`` may be taken over, or None if it may be alive."""
    if "garbage" in holder:
        name = lease_name(holder["number"])
        changed = pages.modified(name)
        if changed is not None and changed + seconds < time.time():
            return (
                f"whose lease {name} cannot be read ({holder['garbage']}) and has not changed "
                f"for {time.time() - changed:.0f} s"
            )
        return None
    pid = holder.get("pid")
    if holder.get("host") == host and isinstance(pid, int):
        if not _pid_alive(pid):
            return f"which died (pid {pid})"
        here = boot_id()
        if holder.get("boot") is not None and here is not None and holder["boot"] != here:
            return f"which died (this host restarted since; pid {pid} is another process now)"
        start = holder.get("start")
        if start is not None and process_start(pid) not in (None, start):
            return f"which died (pid {pid} is another process now)"
    if float(holder.get("expires", 0)) < time.time():
        return f"whose lease ran out (pid {pid} on host {holder.get('host', '?')})"
    return None


def check_unlocked(pages: PageStore) -> None:
    """Raise the refusal :func:`store_lock` would raise now (a live process holds the lock),
    taking nothing: for a command that checks before Spark starts."""
    holder = lock_holder(pages)
    if holder is None:
        return
    seconds = float(env_number("TREESTORE_LOCK_LEASE_SECONDS", LEASE_SECONDS))
    if _stale_reason(pages, holder, socket.gethostname(), seconds) is None:
        raise _refusal(pages, holder, seconds)


@contextmanager
def store_lock(
    pages: PageStore, purpose: str, on_event: EventSink = ignore_events
) -> Iterator[Lease]:
    """Hold the store's lock for a load or a gc; refuse at once if someone else holds it.

    A lock whose holder died is taken over (with a message). Yields the :class:`Lease`.
    A store folder that the block created and left without a published version is
    removed afterwards; a location that is a file is refused before anything is created.
    """
    require_folder(pages, creating=True)  # a file there: one line, nothing created
    new_folder = _is_new_folder(pages)
    seconds = float(env_number("TREESTORE_LOCK_LEASE_SECONDS", LEASE_SECONDS))
    host = socket.gethostname()
    numbers = _lease_numbers(pages)
    newest = numbers[-1] if numbers else 0
    holder = lock_holder(pages)
    if holder is not None:
        reason = _stale_reason(pages, holder, host, seconds)
        if reason is None:
            raise _refusal(pages, holder, seconds)
        on_event(Message(f"taking over the lock of {holder.get('purpose', 'a load')}, {reason}"))
    now = time.time()
    body = {
        "pid": os.getpid(),
        "start": process_start(os.getpid()),
        "boot": boot_id(),
        "host": host,
        "since": now,
        "expires": now + seconds,
        "purpose": purpose,
        "id": uuid.uuid4().hex,
    }
    if not pages.create(lease_name(newest + 1), json.dumps(body).encode()):
        raced = lock_holder(pages) or {}
        raise _refusal(pages, raced, seconds)
    lease = Lease(pages, newest + 1, body, seconds)
    try:
        yield lease
    except Exception as exc:
        _remove_what_failed_wrote(pages, lease, exc)
        raise
    finally:
        lease.release()
        if new_folder:  # a failed first load leaves no folder behind
            _remove_if_unpublished(pages)


def _is_new_folder(pages: PageStore) -> bool:
    """Whether nothing is at the store's location yet (a folder a load would create)."""
    return (  # a store.json answers at once, with no listing of an object store's prefix
        isinstance(pages, FilePageStore) and not pages.exists(CONFIG) and not pages.folder_exists()
    )


def _remove_if_unpublished(pages: PageStore) -> None:
    """Remove the store's folder if it holds no published version and no rejected records
    a failed load set aside for the user to look at: call it only for a folder this
    process created (:func:`_is_new_folder`) and still holds the lock of, so a failed
    first load leaves nothing behind but what its error message points to."""
    if not isinstance(pages, FilePageStore):
        return
    if not pages.exists(CURRENT) and not pages.list(REJECTED):
        pages.remove_all()


def _remove_what_failed_wrote(pages: PageStore, lease: Lease, failure: Exception) -> None:
    """After the block failed: remove the files it wrote that no published version uses,
    keeping the rejected records its message names, if this process still holds the lock.

    Quietly does nothing when it cannot (the lock was lost, the store cannot be read, a
    file cannot be deleted): the failure's own message is what the user needs, and the
    files left are unused ones that gc or the next load removes."""
    message = str(failure)

    def named(name: str) -> bool:
        return name.rsplit("/", 1)[0] in message

    with contextlib.suppress(StoreError, OSError):
        lease.verify()
        remove_partial_files(pages, keep=named, still_held=lease.verify)
