"""Settings read from ``TREESTORE_*`` environment variables."""

from __future__ import annotations

import os

from treestore.errors import SettingError

__all__ = [
    "HUGE_PAGES_ENV",
    "MEMORY_SETTINGS",
    "env_number",
    "prepare_driver_memory",
    "prepare_memory",
]

MEMORY_SETTINGS = {"MIMALLOC_PURGE_DELAY": "10000"}
"""How a treestore process (the driver and the executors' Python workers) handles big
temporary arrays, unless the environment already says otherwise:
``MIMALLOC_PURGE_DELAY`` is how long Arrow's allocator (mimalloc) keeps memory freed
before it gives it back to the system. Given back at once, the big arrays of one step of
a query are faulted in again by the next step; ten seconds keeps a query's memory
between its steps and for the next query, and still gives it back soon after (0.7-1.1 s
of page faults per answer of the seed's regrouping query). mimalloc reads it at its
first allocation, so it is set as the ``treestore`` package is imported."""

HUGE_PAGES_ENV = "NUMPY_MADVISE_HUGEPAGE"
"""numpy asks the kernel for huge pages for each big array. Where the kernel honours
that only on request (``transparent_hugepage`` ``madvise``, as here), each such array's
first touch may wait while the kernel compacts memory to find huge pages: the seed's
regrouping answer spent 1.4-2.0 s of system time in the driver's fold against 1.1-1.3 s
of its own work, 0.2 s without them. So the driver asks for none, unless this variable
says otherwise. The executors' workers keep numpy's default: their part of that answer
took the same time either way, and the sweep's range plan (big sorts) was faster with
huge pages (3.2 s against 3.6 s, medians of four runs)."""


def prepare_memory() -> dict[str, str]:
    """Put :data:`MEMORY_SETTINGS` into this process's environment where it does not set
    them already, and return the values in force (for the executors). Runs as the
    ``treestore`` package is imported (which every treestore module does first): before
    Arrow's first allocation, unless the program made one first."""
    return {name: os.environ.setdefault(name, value) for name, value in MEMORY_SETTINGS.items()}


def prepare_driver_memory() -> dict[str, str]:
    """:func:`prepare_memory`, and numpy asks for no huge pages in this process unless
    :data:`HUGE_PAGES_ENV` says otherwise (see there); for the driver, not the workers."""
    from numpy._core import multiarray

    if HUGE_PAGES_ENV not in os.environ:
        multiarray._set_madvise_hugepage(False)  # type: ignore[attr-defined]
    return prepare_memory()


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
