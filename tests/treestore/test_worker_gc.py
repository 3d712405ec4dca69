"""A reused Python worker freezes what is alive at its second task, so that PySpark's
full collection after each task scans only what the later tasks leave; the driver and
workers used once freeze nothing; every function treestore gives Spark's workers
counts its task."""

from __future__ import annotations

import gc
import types
from collections.abc import Iterator

import pytest

from loaders.load import dedup_step, inputs, task
from loaders.route import arrow_map, pieces
from loaders.sweep import broadcast_plan, command, packed_range, range_plan
from query.driver import connect_pieces, runner, spark_source
from treestore import settings as worker_gc


@pytest.fixture
def fresh_count(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process as if it had started no task; whatever a test froze is thawed."""
    monkeypatch.setattr(worker_gc, "_STARTED", [0])
    yield
    gc.unfreeze()


def test_the_driver_freezes_nothing(fresh_count: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    frozen = gc.get_freeze_count()
    for _ in range(worker_gc.FREEZE_AT_TASK + 2):
        worker_gc.task_started()
    assert gc.get_freeze_count() == frozen


def test_a_reused_worker_freezes_at_its_second_task(
    fresh_count: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    gc.unfreeze()
    worker_gc.task_started()
    assert gc.get_freeze_count() == 0
    worker_gc.task_started()
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the test process's modules and objects
    later = [[] for _ in range(1000)]  # what a later task makes (its garbage, maybe)
    worker_gc.task_started()  # later tasks freeze nothing more
    assert gc.get_freeze_count() < frozen + len(later)  # frozen objects may go, none come
    assert id(later[0]) in {id(thing) for thing in gc.get_objects()}  # still collectable


def _probe(parts: Iterator[int]) -> Iterator[tuple[int, int, int]]:
    """A task as treestore's are: counted first; reports its process, how many tasks the
    process started and how many objects are frozen."""
    import os

    from treestore import settings as counted

    counted.task_started()
    list(parts)
    yield os.getpid(), counted._STARTED[0], gc.get_freeze_count()


def test_spark_workers_freeze_once_they_have_run_a_task(spark) -> None:  # type: ignore[no-untyped-def]
    rows = spark.sparkContext.parallelize(range(12), 12).mapPartitions(_probe).collect()
    later = [row for row in rows if row[1] >= worker_gc.FREEZE_AT_TASK]
    assert later, rows  # two cores, twelve tasks: a worker runs several
    assert all(frozen > 1000 for _pid, _count, frozen in later), rows


FACTORIES = [
    (runner, "_shard_task"),
    (connect_pieces, "_result_task"),
    (pieces, "route_task"),
    (arrow_map, "read_task"),
    (dedup_step, "_index_task"),
    (task, "shard_task"),
    (inputs, "read_source"),
    (range_plan, "_summary_task"),
    (range_plan, "_sweep_task"),
    (range_plan, "_sorted_rows_task"),
    (packed_range, "_sweep_task"),
    (command, "_parts_writer"),
    (broadcast_plan, "_lookup_task"),
]


def _inner_functions(code: types.CodeType) -> list[types.CodeType]:
    return [const for const in code.co_consts if isinstance(const, types.CodeType)]


@pytest.mark.parametrize(("module", "name"), FACTORIES, ids=lambda v: getattr(v, "__name__", v))
def test_every_worker_function_counts_its_task(module: types.ModuleType, name: str) -> None:
    factory = getattr(module, name)
    inner = [c for c in _inner_functions(factory.__code__) if c.co_name in {"run", "read", "write"}]
    assert inner, f"{module.__name__}.{name} gives no task function"
    assert all("task_started" in c.co_names for c in inner), [c.co_name for c in inner]


def test_the_spark_source_reader_counts_its_task() -> None:
    assert "task_started" in spark_source.TreestoreReader.read.__code__.co_names
