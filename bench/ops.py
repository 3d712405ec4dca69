"""Benchmark of the driver's ops over 1M rows: on Arrow columns against the same ops on rows.

The rows are what a scan sends the driver: Arrow batches of 65,536 rows with a text
key (100k distinct), a text value of 1-3 comma-separated ids and a whole number.
For each op the driver runs them on columns (``Rows`` over typed pieces) and, as the
peer, on Python rows (the same ops' row path, as before); both must give the same
rows. Goal: ``gather``, ``merge`` and ``sort`` each under 1 s over 1M rows.

    .venv/bin/python bench/ops.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path

# This file is in bench/, next to bench/query.py: drop its folder from the import path,
# or that file would stand in for the `query` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

from treestore.settings import prepare_process  # noqa: E402

prepare_process()  # first, before numpy and pyarrow load: the treestore command's settings

# isort: split
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from query.driver.plan import QueryPlan  # noqa: E402
from query.driver.result import Piece, Rows  # noqa: E402
from query.ops.columns import ColumnType  # noqa: E402
from query.ops.compiler import compile_ops  # noqa: E402

OPS = {
    "gather": "gather=kJsu",
    "merge": "merge=kjs",
    "sort": "sort=0,2:sn:ad",
}
BATCH = 65_536


def pieces(rows: int, sort_keys: bool) -> list[pa.RecordBatch]:
    """The scan's batches: key, comma-separated ids, a whole number."""
    rng = np.random.default_rng(23)
    keys = rng.integers(0, 100_000, rows)
    if sort_keys:
        keys = np.sort(keys)
    ids = rng.integers(1, 1000, (rows, 3)).astype(str)
    counts = rng.integers(1, 4, rows)
    values = [",".join(r[:n]) for r, n in zip(ids.tolist(), counts.tolist(), strict=True)]
    table = pa.table(
        {
            "c0": pa.array(np.char.add("k", keys.astype(str))),
            "c1": pa.array(values),
            "c2": pa.array(rng.integers(0, 1000, rows)),
        }
    )
    return table.to_batches(BATCH)


def run(batches: list[pa.RecordBatch], ops: str, columns: bool) -> tuple[float, list]:  # type: ignore[type-arg]
    def produce() -> Iterator[Piece]:
        yield from batches

    types: list[ColumnType] | None = ["str", "str", "int"] if columns else None
    result = Rows(produce, QueryPlan.over_pieces(compile_ops(ops), types))
    started = time.perf_counter()
    out = result.to_arrow()
    return time.perf_counter() - started, out.to_pylist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    for name, ops in OPS.items():
        batches = pieces(args.rows, sort_keys=name == "merge")
        run(batches, ops, columns=True)  # warm up
        ours, answer = run(batches, ops, columns=True)
        peer, expected = run(batches, ops, columns=False)
        if answer != expected:
            print(f"RESULTS DIFFER for {ops}")
            sys.exit(1)
        verdict = "PASS" if ours < 1.0 else "FAIL"
        print(
            f"{ops:<16} over {args.rows:,} rows: columns {ours:.2f} s, rows {peer:.2f} s "
            f"-> {peer / ours:.1f}x faster (goal < 1 s): {verdict}"
        )


if __name__ == "__main__":
    main()
