"""A user's own ``query.py`` or ``shell.py`` next to their script is named in one error,
never a puzzling import failure deep inside treestore (:mod:`treestore.packages`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from treestore.errors import ShadowedPackageError
from treestore.packages import require_own_packages, shadowing_file

OPEN = """
import treestore
try:
    treestore.open("no-such-store")
except treestore.TreestoreError as exc:
    print(type(exc).__name__, exc)
"""
LOAD = """
from treestore.errors import ShadowedPackageError
try:
    from loaders import load_job
except ShadowedPackageError as exc:
    print(type(exc).__name__, exc)
"""


def _script(folder: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    (folder / "script.py").write_text(text)
    return subprocess.run(
        [sys.executable, *(args or ["script.py"])],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("script", [OPEN, LOAD], ids=["open", "loaders"])
@pytest.mark.parametrize("shadow", ["query.py", "query/__init__.py"])
def test_a_users_query_module_is_named(tmp_path: Path, script: str, shadow: str) -> None:
    (tmp_path / shadow).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / shadow).write_text("x = 1\n")
    done = _script(tmp_path, script)
    assert done.returncode == 0, done.stderr
    named = tmp_path / shadow.removesuffix("/__init__.py")
    assert done.stdout.startswith(f"ShadowedPackageError {named} hides treestore's 'query'")


def test_without_a_shadow_open_reaches_the_store(tmp_path: Path) -> None:
    """The check can pass: with no query.py here, open fails on the missing store."""
    done = _script(tmp_path, OPEN)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("StoreError")


def test_python_m_treestore_names_a_users_shell_module(tmp_path: Path) -> None:
    (tmp_path / "shell.py").write_text("raise SystemExit('the wrong shell ran')\n")
    done = _script(tmp_path, "", "-m", "treestore", "--help")
    assert done.returncode == 2
    assert done.stderr == (
        f"treestore: {tmp_path / 'shell.py'} hides treestore's 'shell' package (Python "
        "imports the first 'shell' it finds, and the script's own folder comes first). "
        "Rename that file or folder, or run from another folder.\n"
    )


def test_treestores_own_packages_pass() -> None:
    assert [shadowing_file(name) for name in ("query", "loaders", "shell")] == [None] * 3
    require_own_packages()
    with pytest.raises(ShadowedPackageError):
        require_own_packages("json")  # the standard library's json is not treestore's
