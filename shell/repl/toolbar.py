"""The bottom toolbar: which store and version (and whether a newer one is out), and the
display settings."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from shell.repl.meta import MetaSession

__all__ = ["fit", "toolbar"]


def fit(parts: list[str], width: int) -> str:
    """``parts`` joined by ``|``, the last ones dropped until the bar fits ``width``
    columns (the first cut short with ``…`` if it alone is too wide)."""
    for count in range(len(parts), 0, -1):
        text = "  |  ".join(parts[:count])
        if len(text) <= width - 1:
            return text
    return parts[0][: max(width - 2, 0)] + "…"


def toolbar(session: MetaSession) -> Callable[[], str]:
    """A function prompt_toolkit calls to draw the toolbar."""

    def draw() -> str:
        store = session.store
        limit = f"{session.limit:,}" if session.limit else "off"
        newest = session.newest_version()
        newer = f" (version {newest} is out: \\refresh)" if newest > store.version else ""
        parts = [
            f" {session.store_dir}  version {store.version}{newer}, {store.shards} shards",
            f"format {session.format}, limit {limit}",
            "Tab completes, \\help, Ctrl-D quits",
        ]
        return fit(parts, shutil.get_terminal_size((80, 24)).columns)

    return draw
