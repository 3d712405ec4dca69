"""A treestore process keeps freed Arrow memory for ten seconds and asks numpy for no huge
pages (treestore.settings.MEMORY_SETTINGS), whichever of its packages a program imports
first, unless the environment says otherwise. mimalloc reads its options at its first
allocation and prints them with ``MIMALLOC_VERBOSE=1``, so the value in force is seen,
not only the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from treestore.settings import MEMORY_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
SHOW = (
    "import numpy, pyarrow as pa\n"
    "pa.allocate_buffer(1)\n"
    "print(numpy._core.multiarray._get_madvise_hugepage())\n"
)


def _run(code: str, **env: str) -> tuple[str, str]:
    """Run ``code`` in a fresh interpreter from the project's folder, with mimalloc's
    options printed; returns (purge delay in force, numpy's huge-page setting)."""
    clean = {k: v for k, v in os.environ.items() if k not in MEMORY_SETTINGS}
    done = subprocess.run(
        [sys.executable, "-c", code + "\n" + SHOW],
        cwd=ROOT,
        env={**clean, "MIMALLOC_VERBOSE": "1", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    delays = [
        line.split(":")[1].strip() for line in done.stderr.splitlines() if "'purge_delay'" in line
    ]
    return (delays[0] if delays else ""), done.stdout.split()[-1]


@pytest.mark.parametrize(
    "first",
    [
        "import treestore",
        "from loaders import interval_sweep",
        "from loaders import run_load",
        "from shell.entry import run",
        "import query",
    ],
)
def test_each_package_sets_them_before_arrow_allocates_and_numpy_loads(first: str) -> None:
    assert _run(first) == ("10000", "False")


def test_numpy_loaded_before_treestore_is_told() -> None:
    delay, huge = _run("import numpy\nimport treestore")
    assert huge == "False"
    assert delay == "10000"


def test_the_environment_wins() -> None:
    assert _run("import treestore", MIMALLOC_PURGE_DELAY="250", NUMPY_MADVISE_HUGEPAGE="1") == (
        "250",
        "True",
    )


def test_without_treestore_the_defaults_differ() -> None:
    """The check above can fail: a program that never imports treestore gets mimalloc's
    and numpy's own defaults."""
    assert _run("import json") != ("10000", "False")
