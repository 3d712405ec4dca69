"""Settings read from ``TREESTORE_*`` environment variables."""

from __future__ import annotations

import os
import sys

from treestore.errors import SettingError

__all__ = ["MEMORY_SETTINGS", "env_number", "prepare_memory"]

MEMORY_SETTINGS = {"MIMALLOC_PURGE_DELAY": "10000", "NUMPY_MADVISE_HUGEPAGE": "0"}
"""How a treestore process (the driver and the executors' Python workers) handles big
temporary arrays, unless the environment already says otherwise.

``MIMALLOC_PURGE_DELAY``: how long Arrow's allocator (mimalloc) keeps memory freed
before it gives it back to the system. Its default, 10 ms, gives back the big arrays of
one step of a query before the next step asks for as much again, which then costs page
faults; ten seconds keeps a query's memory between its steps and for the next query,
and still gives it back soon after. mimalloc reads it at its first allocation.

``NUMPY_MADVISE_HUGEPAGE``: numpy asks the kernel for huge pages for each big array;
where the kernel honours that only on request (``transparent_hugepage`` ``madvise``,
as here), each such array's first touch waits while the kernel compacts memory to find
huge pages. On the seed's regrouping answer the driver's fold spent 1.4-2.0 s of system
time against 1.1-1.3 s of its own work; with both settings 0.2 s (and the answer 4.6 s
-> 3.4 s, medians of 4)."""


def prepare_memory() -> dict[str, str]:
    """Put :data:`MEMORY_SETTINGS` into this process's environment where it does not set
    them already, tell an already loaded numpy, and return the values in force (for
    the executors). Runs when ``treestore`` is imported: before numpy loads and before
    Arrow's first allocation, unless the program made those first."""
    chosen = {name: os.environ.setdefault(name, value) for name, value in MEMORY_SETTINGS.items()}
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # it read its variable when it loaded
        numpy._core.multiarray._set_madvise_hugepage(chosen["NUMPY_MADVISE_HUGEPAGE"] != "0")
    return chosen


def env_number(name: str, default: float, whole: bool = False) -> float:
    """The number in environment variable ``name`` (``default`` when unset); a
    :class:`SettingError` naming the variable and its value when it is not one.

    >>> env_number("TREESTORE_EXAMPLE_UNSET", 256)
    256
    """
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        return int(text) if whole else float(text)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise SettingError(
            f"{name}={text!r} is not {kind}; set it to {kind} (default {default}) or unset it."
        ) from None
