"""The shell's pager: ``less`` that leaves the result on the screen when you quit it.

``less`` by default switches the terminal to its alternate screen and back, so quitting
it takes the rows away with it; ``-X`` keeps them (and ``-R`` its colours, ``-F``
quits at once when the text fits). A ``$PAGER`` of the user's own is used as given.
"""

from __future__ import annotations

import os
import pydoc
import shlex
import shutil

__all__ = ["less_settings", "page"]


def less_settings(environ: dict[str, str] | os._Environ[str]) -> str | None:
    """The ``LESS`` flags to page with, or None to leave paging to :func:`pydoc.pager`
    (the user chose a pager, or there is no ``less``)."""
    if environ.get("PAGER") or shutil.which("less") is None:
        return None
    flags = environ.get("LESS", "-R")
    return flags if "X" in flags else f"{flags} -X".strip()


def page(text: str) -> None:
    """Show ``text`` in the pager; the rows stay on the screen after it quits."""
    flags = less_settings(os.environ)
    if flags is None:
        pydoc.pager(text)
        return
    # pydoc's pipe pager runs the command in a shell: LESS is set for less alone
    pydoc.pipepager(text, f"LESS={shlex.quote(flags)} less")
