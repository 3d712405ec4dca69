"""The ``treestore`` command keeps freed Arrow memory for ten seconds (MEMORY_SETTINGS) and
asks numpy for no huge pages, unless the environment says otherwise; importing treestore
(or the query and load facades) changes nothing in the process. mimalloc reads its
options at its first allocation and prints them with ``MIMALLOC_VERBOSE=1``, so the
value in force is seen, not only the environment. (numpy has no public getter of its
huge-page setting: the probe reads its private one; the library never does.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from treestore.settings import HUGE_PAGES_ENV, MEMORY_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
SHOW = (
    "import numpy, pyarrow as pa\n"
    "pa.allocate_buffer(1)\n"
    "print(numpy._core.multiarray._get_madvise_hugepage())\n"
)


def _verbose_env(**env: str) -> dict[str, str]:
    """This process's environment without the memory variables, with mimalloc's options
    printed, and ``env`` on top."""
    clean = {k: v for k, v in os.environ.items() if k not in {*MEMORY_SETTINGS, HUGE_PAGES_ENV}}
    return {**clean, "MIMALLOC_VERBOSE": "1", **env}


def _run(code: str, **env: str) -> tuple[str, str]:
    """Run ``code`` in a fresh interpreter from the project's folder, with mimalloc's
    options printed; returns (purge delay in force, numpy's huge-page setting)."""
    done = subprocess.run(
        [sys.executable, "-c", code + "\n" + SHOW],
        cwd=ROOT,
        env=_verbose_env(**env),
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
        "from loaders import run_load",
        "import query",
        "import treestore, query.driver.runner, loaders.load.driver",
    ],
)
def test_importing_treestore_changes_nothing_in_the_process(first: str) -> None:
    """No variable is set or changed, and Arrow and numpy keep their own defaults."""
    same = "import os\nbefore = dict(os.environ)\n" + first + "\nassert dict(os.environ) == before"
    assert _run(same) == _run("import json")


def test_the_command_line_sets_the_delay() -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "treestore"), "--help"],
        env=_verbose_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "option 'purge_delay': 10000" in done.stderr


DRIVER = "from treestore.settings import prepare_process\nprepare_process()\nimport numpy"


def test_the_driver_asks_for_no_huge_pages() -> None:
    assert _run(DRIVER) == ("10000", "False")


def test_the_environment_wins() -> None:
    assert _run(DRIVER, MIMALLOC_PURGE_DELAY="250", NUMPY_MADVISE_HUGEPAGE="1") == ("250", "True")


def test_without_treestore_the_defaults_differ() -> None:
    """The checks above can fail: a program that never imports treestore gets mimalloc's
    and numpy's own defaults (on this kernel numpy asks for huge pages)."""
    assert _run("import json") != ("10000", "False")
