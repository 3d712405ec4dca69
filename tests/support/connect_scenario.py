"""Steps run on a Spark Connect session, in a process of their own.

``python -m tests.support.connect_scenario URL WORKDIR STEP...`` opens a Spark Connect
session on the server at ``URL`` (through :func:`treestore.spark.get_session`, as the
command line does) and runs each STEP, a JSON object, in order; it prints one JSON
document on its last line of stdout: ``{"results": [...]}``, one result per step. A
Connect client and a classic session cannot share a process (see
:mod:`tests.support.connect_server`), so tests compare these results with the same steps
run on their classic session. Relative paths are under WORKDIR.

The steps (``do``):

- ``cli``: ``treestore ARGS`` (:func:`shell.cli.main`) in WORKDIR, its exit status and
  output.
- ``load``: ``run_load`` of ``job`` into ``store``: the version, the sources' counts and
  the load's event lines; or the error (its class and message). With
  ``file_limit_pid``, that process (the server's JVM) may not grow a file past a byte
  during the load.
- ``write``: write ``text`` to the file ``path`` (a new input between two loads).
- ``sweep``: ``interval_sweep`` of the ``events`` and ``intervals`` rows (with their
  Spark schemas ``events_schema`` and ``intervals_schema``) with ``agg``, ``plan`` and
  ``closed``; its rows as lists, sorted, and the report's plan and notes.
  ``connect_index_bytes`` sets the most the broadcast plan ships in its plan.
- ``parallelism``: :func:`treestore.spark.default_parallelism`.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.file_limits import file_size_limit

__all__ = ["main", "sweep_rows"]


def sweep_rows(rows: list[Any]) -> list[list[Any]]:
    """A sweep's result rows as lists of plain values (sets and lists sorted), sorted."""

    def plain(value: Any) -> Any:
        return sorted(value) if isinstance(value, list | tuple | set) else value

    return sorted([plain(v) for v in row] for row in rows)


def _load(spark: Any, work: Path, step: dict[str, Any]) -> dict[str, Any]:
    from loaders import load_job, run_load
    from treestore.errors import TreestoreError
    from treestore.events import Event, StageFinished, StageProgress, as_lines

    lines: list[str] = []
    stages: list[Event] = []
    write_line = as_lines(lines.append)

    def sink(event: Event) -> None:
        if isinstance(event, (StageProgress, StageFinished)):
            stages.append(event)
        write_line(event)

    limit: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if "file_limit_pid" in step:  # the server's JVM may not grow a file past a byte
        spark.range(1).mapInArrow(lambda batches: batches, "id long").collect()  # workers up
        limit = file_size_limit(int(step["file_limit_pid"]), 1)
    try:
        with limit:
            result = run_load(spark, load_job(work / step["job"]), work / step["store"], sink)
    except TreestoreError as exc:
        return {"error": type(exc).__name__, "message": str(exc), "events": lines}
    return {
        "version": result.version,
        "sources": result.report.get("sources"),
        "events": lines,
        "stage_events": len(stages),
    }


def _sweep(spark: Any, work: Path, step: dict[str, Any]) -> dict[str, Any]:
    from loaders.sweep import broadcast_plan
    from loaders.sweep.driver import SweepReport, interval_sweep

    if "connect_index_bytes" in step:
        broadcast_plan.CONNECT_INDEX_BYTES = int(step["connect_index_bytes"])
    events = spark.createDataFrame([tuple(r) for r in step["events"]], step["events_schema"])
    intervals = spark.createDataFrame(
        [tuple(r) for r in step["intervals"]], step["intervals_schema"]
    )
    report = SweepReport()
    result = interval_sweep(
        spark,
        events,
        intervals,
        step.get("agg", "sum"),
        step.get("closed", "both"),
        plan=step.get("plan", "auto"),
        report=report,
    )
    return {"rows": sweep_rows(result.collect()), "plan": report.plan, "notes": report.notes}


def _cli(spark: Any, work: Path, step: dict[str, Any]) -> dict[str, Any]:
    from shell.cli import main as treestore

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(work), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = treestore([str(a) for a in step["args"]])
    return {"args": step["args"], "status": status, "out": out.getvalue(), "err": err.getvalue()}


def _write(spark: Any, work: Path, step: dict[str, Any]) -> dict[str, Any]:
    path = work / step["path"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(step["text"])
    return {}


def _parallelism(spark: Any, work: Path, step: dict[str, Any]) -> dict[str, Any]:
    from treestore.spark import default_parallelism

    return {"parallelism": default_parallelism(spark)}


STEPS: dict[str, Callable[[Any, Path, dict[str, Any]], dict[str, Any]]] = {
    "cli": _cli,
    "load": _load,
    "write": _write,
    "sweep": _sweep,
    "parallelism": _parallelism,
}


def main(argv: list[str]) -> int:
    """Run the steps of ``argv`` (URL WORKDIR STEP...); print their results."""
    url, work, steps = argv[0], Path(argv[1]), [json.loads(s) for s in argv[2:]]
    from treestore.spark import get_session

    results = []
    for step in steps:
        # a cli step may open the session itself (by its --master); others take it
        spark = None if step["do"] == "cli" else get_session(url)
        results.append({"do": step["do"], **STEPS[step["do"]](spark, work, step)})
    print(json.dumps({"results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
