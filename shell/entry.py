"""The ``treestore`` command's entry point (``python -m treestore`` too): Ctrl-C at any
moment, even while the command line's modules load, is one line and exit status 130."""

from __future__ import annotations

import contextlib
import os
import signal
import sys

from treestore.settings import prepare_process

__all__ = ["run"]

INTERRUPTED = 130


def run() -> None:
    """Run the command line (:func:`shell.cli.main`) and exit with its status.

    After Ctrl-C the process ends with ``os._exit(130)`` once its output is flushed:
    the command has already let go of what it held (its ``finally`` blocks ran), and
    the interpreter's own shutdown could otherwise still end it by SIGINT (exit status
    -2; seen in 2 of 60 runs interrupted 0.15-0.3 s after the start). A JVM it started
    exits when its pipe from this process closes.
    """
    prepare_process()  # before numpy and pyarrow load: the process's memory settings
    try:
        from shell.cli import main

        code = main()
    except KeyboardInterrupt:  # while the modules load, before main's own handling
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("interrupted", file=sys.stderr)
        code = INTERRUPTED
    if code == INTERRUPTED:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(INTERRUPTED)
    sys.exit(code)
