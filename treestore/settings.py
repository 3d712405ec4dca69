"""Settings read from ``TREESTORE_*`` environment variables, and how treestore's processes
(the driver, the executors' Python workers) prepare themselves."""

from __future__ import annotations

import gc
import os

from treestore.errors import SettingError

__all__ = [
    "FREEZE_AT_TASK",
    "HUGE_PAGES_ENV",
    "MEMORY_SETTINGS",
    "WORKER_HUGE_PAGES",
    "env_number",
    "memory_settings",
    "prepare_process",
    "task_started",
    "worker_settings",
]

MEMORY_SETTINGS = {"MIMALLOC_PURGE_DELAY": "10000"}
"""How a treestore process (the driver and the executors' Python workers) handles big
temporary arrays, unless the environment already says otherwise:
``MIMALLOC_PURGE_DELAY`` is how long Arrow's allocator (mimalloc) keeps memory freed
before it gives it back to the system. Given back at once, the big arrays of one step of
a query are faulted in again by the next step; ten seconds keeps a query's memory
between its steps and for the next query, and still gives it back soon after (0.7-1.1 s
of page faults per answer of the seed's regrouping query). mimalloc reads it at its
first allocation, so the entry points (the ``treestore`` command, the benchmarks) set it
first, with :func:`prepare_process`; importing ``treestore`` changes nothing in the
process. The executors' workers get it from the session (:func:`worker_settings`)."""

HUGE_PAGES_ENV = "NUMPY_MADVISE_HUGEPAGE"
"""numpy asks the kernel for huge pages for each big array. Where the kernel honours
that only on request (``transparent_hugepage`` ``madvise``, as here), each such array's
first touch may wait while the kernel compacts memory to find huge pages: the seed's
regrouping answer spent 1.4-2.0 s of system time in the driver's fold against 1.1-1.3 s
of its own work, 0.2 s without them. numpy reads this variable as it is imported, so the
entry points set it to ``0`` before (unless it is set already). The executors' workers
ask for huge pages (numpy's own default on Linux): their part of that answer took the
same time either way, and the sweep's range plan (big sorts) was faster with huge pages
(3.2 s against 3.6 s, medians of four runs)."""

WORKER_HUGE_PAGES = "1"
"""The executors' workers' :data:`HUGE_PAGES_ENV` (see there)."""


def memory_settings() -> dict[str, str]:
    """:data:`MEMORY_SETTINGS` as this process's environment overrides them (read only)."""
    return {name: os.environ.get(name, value) for name, value in MEMORY_SETTINGS.items()}


def worker_settings() -> dict[str, str]:
    """The environment the executors' Python workers get (``spark.executorEnv.*``): the
    memory settings in force here, and numpy's huge pages on (:data:`HUGE_PAGES_ENV`)."""
    return {**memory_settings(), HUGE_PAGES_ENV: WORKER_HUGE_PAGES}


def prepare_process() -> None:
    """For entry points only, before numpy and pyarrow are imported: put
    :data:`MEMORY_SETTINGS` and ``NUMPY_MADVISE_HUGEPAGE=0`` into this process's
    environment where it does not set them already (see :data:`HUGE_PAGES_ENV`).
    The ``treestore`` command calls it first; a program using the Python API may too,
    or set the variables itself."""
    os.environ.setdefault(HUGE_PAGES_ENV, "0")
    for name, value in MEMORY_SETTINGS.items():
        os.environ.setdefault(name, value)


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


FREEZE_AT_TASK = 2
"""The task at whose start a reused Python worker moves every object alive into the
permanent generation (``gc.freeze()``).

PySpark keeps a Python worker for the next task (``spark.python.worker.reuse``, on by
default) and runs a full ``gc.collect()`` in it after every task. A full collection
visits every object the process tracks, and a treestore worker holds about 250k, most
of them its imports' (numba's registries and kernels, pyarrow, lark, the rooms'
modules): 90-100 ms a collection after each task, a query's or a load's (about 0.3 s of
CPU per answer of the seed's query). Frozen, they are left out: 5-9 ms. By the second
task the first task's imports and lazily loaded kernels are in place and the daemon's
collection after it has freed its garbage, so what is frozen is what the process keeps."""

_STARTED = [0]  # tasks started in this process


def task_started() -> None:
    """Call first in each function Spark's Python workers run for treestore: counts the
    process's tasks and freezes what is alive at :data:`FREEZE_AT_TASK` in a reused
    worker (``SPARK_REUSE_WORKER`` set, as PySpark's daemon sets it); elsewhere (the
    driver, a worker used once) it changes nothing."""
    _STARTED[0] += 1
    if _STARTED[0] == FREEZE_AT_TASK and os.environ.get("SPARK_REUSE_WORKER"):
        gc.freeze()
