"""The store's lock: one load (or gc) at a time writes a store.

``LOCK`` holds who took it (pid, host, since when, for what). A lock left by a
process that died on this host is taken over.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from treestore.errors import StoreError
from treestore.events import EventSink, Message, ignore_events
from treestore.storage.pagestore import PageStore
from treestore.store.versions import LOCK_NAME

__all__ = ["store_lock"]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def store_lock(
    store: PageStore, purpose: str, on_event: EventSink = ignore_events
) -> Iterator[None]:
    """Hold the store's lock for a load or a gc; refuse at once if someone else holds it.

    A lock left by a process that died on this host is taken over (with a
    message). On the local filesystem taking the lock is atomic (``O_EXCL``).
    """
    me = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.time(),
        "purpose": purpose,
    }
    body = json.dumps(me).encode()
    path = store.local_path(LOCK_NAME)
    for _attempt in range(2):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(body)
                break
        elif not store.exists(LOCK_NAME):  # other filesystems: best effort
            store.write(LOCK_NAME, body)
            break
        try:
            holder = json.loads(store.read(LOCK_NAME))
        except (StoreError, ValueError):
            holder = {}
        same_host = holder.get("host") == me["host"]
        if same_host and isinstance(holder.get("pid"), int) and not _pid_alive(holder["pid"]):
            on_event(
                Message(
                    f"taking over the lock of {holder.get('purpose', 'a load')} "
                    f"(pid {holder['pid']}), which died"
                )
            )
            store.delete(LOCK_NAME)
            continue
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0)))
        raise StoreError(
            f"The store {store.location} is locked by {holder.get('purpose', 'another process')} "
            f"(pid {holder.get('pid', '?')} on host {holder.get('host', '?')}) since {since}. "
            f"Wait for it to finish; if no such process runs, remove {store.location}/{LOCK_NAME}."
        )
    else:
        raise StoreError(f"Cannot take the lock of {store.location}.")
    try:
        yield
    finally:
        store.delete(LOCK_NAME)
