"""Missing or old Java stops with one clear sentence, from Python and from the Makefile check."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from treestore.errors import SparkSetupError
from treestore.spark import check_java

ROOT = Path(__file__).resolve().parents[2]


def _fake_java(folder: Path, version: str) -> None:
    java = folder / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2020-01-01' >&2\n")
    java.chmod(0o755)


def _path_with(folder: Path) -> str:
    python_dir = Path(shutil.which("python3") or "/usr/bin/python3").parent
    return os.pathsep.join([str(folder), str(python_dir), "/usr/bin", "/bin"])


def test_java_17_is_accepted() -> None:
    assert check_java() >= 17


@pytest.mark.parametrize("version", ["11.0.2", "1.8.0_292"])
def test_old_java_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    _fake_java(tmp_path, version)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkSetupError, match="Java 17 or newer"):
        check_java()


def test_missing_java_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkSetupError, match="no 'java' is on PATH"):
        check_java()


@pytest.mark.parametrize(("version", "ok"), [("11.0.2", False), ("17.0.15", True), ("21", True)])
def test_make_check_script(tmp_path: Path, version: str, ok: bool) -> None:
    _fake_java(tmp_path, version)
    env = {**os.environ, "PATH": _path_with(tmp_path)}
    done = subprocess.run(
        ["sh", str(ROOT / "scripts" / "check-java.sh")], env=env, capture_output=True, text=True
    )
    assert (done.returncode == 0) is ok
    if not ok:
        assert done.stderr.count("\n") == 1 and "Java 17 or newer" in done.stderr
