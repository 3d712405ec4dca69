"""A store at a path only the driver has, in one process: what a cluster whose executors
cannot see the driver's folder does to a load.

:class:`DriverOnlyStore` is the store's folder on the driver; each copy of it that a
Spark task unpickles (a load's tasks get the store's page store with their function)
reads and writes another folder instead, ``elsewhere``: the executors' own disks. A load
into it runs its tasks as on such a cluster (their files land where the driver cannot
see them), with a local session.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from treestore.storage.pagestore import FilePageStore

__all__ = ["DriverOnlyStore"]


class DriverOnlyStore(FilePageStore):
    """A store folder ``location`` whose copies in Spark tasks use ``elsewhere`` instead."""

    def __init__(self, location: str | os.PathLike[str], elsewhere: str | os.PathLike[str]):
        super().__init__(location)
        self.elsewhere = str(Path(elsewhere).resolve())

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (in a task): the executor's own folder, not the driver's."""
        self.__dict__.update(state)
        self.location = self.elsewhere
