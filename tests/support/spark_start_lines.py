"""A command's stderr without the lines that say Spark is starting (see shell.spark_start)."""

from __future__ import annotations

__all__ = ["without_spark_start"]


def without_spark_start(stderr: str) -> str:
    """``stderr`` without ``starting Spark…`` and ``Spark started in N s`` lines."""
    kept = [
        line
        for line in stderr.splitlines(keepends=True)
        if line.rstrip("\n") != "starting Spark…" and not line.startswith("Spark started in ")
    ]
    return "".join(kept)
