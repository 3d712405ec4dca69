"""The pager keeps the rows on the screen when it quits (less without its alternate screen)."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from shell.repl.pager import less_settings, page

ALTERNATE_SCREEN = b"\x1b[?1049h"  # xterm's switch to the alternate screen (and back: l)


def _less_output(flags: str, text: Path) -> bytes:
    """What ``less`` writes to a real terminal (a pty) showing ``text``, then quitting."""
    main, child = pty.openpty()
    env = {"PATH": os.environ["PATH"], "TERM": "xterm", "LESS": flags, "LINES": "24"}
    command = ["less", str(text)]
    process = subprocess.Popen(command, stdin=child, stdout=child, stderr=child, env=env)
    os.close(child)
    seen = b""
    deadline = time.monotonic() + 20
    while b"row 2" not in seen and time.monotonic() < deadline:  # the first screen is up
        if select.select([main], [], [], 0.2)[0]:
            seen += os.read(main, 65536)
    os.write(main, b"q")
    process.wait(timeout=20)
    while select.select([main], [], [], 0.2)[0]:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    return seen


@pytest.mark.skipif(shutil.which("less") is None, reason="needs less")
def test_less_keeps_the_rows_on_the_screen_after_quitting(tmp_path: Path) -> None:
    text = tmp_path / "rows.txt"
    text.write_text("".join(f"row {i}\n" for i in range(1, 200)))
    flags = less_settings({})
    assert flags == "-R -X"
    shown = _less_output(flags, text)
    assert b"row 1" in shown and ALTERNATE_SCREEN not in shown
    assert ALTERNATE_SCREEN in _less_output("-R", text)  # less's default: the rows go away


def test_a_pager_of_the_users_own_is_left_alone_and_their_flags_kept() -> None:
    assert less_settings({"PAGER": "most"}) is None
    assert less_settings({"LESS": "-FRSX"}) == "-FRSX"
    assert less_settings({"LESS": "-S"}) == "-S -X"


def test_page_runs_less_with_its_flags_and_leaves_the_environment_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in ``less`` on PATH writes the LESS it was given; the process's own stays."""
    said = tmp_path / "said"
    fake = tmp_path / "less"
    fake.write_text(f'#!/bin/sh\necho "$LESS" > {said}\ncat > /dev/null\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("PAGER", raising=False)
    monkeypatch.setenv("LESS", "-R -F")
    page("row 1\nrow 2\n")
    assert said.read_text() == "-R -F -X\n"
    assert os.environ["LESS"] == "-R -F"
