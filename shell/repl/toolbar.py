"""The bottom toolbar: which store and version (and whether a newer one is out), and the
display settings."""

from __future__ import annotations

from collections.abc import Callable

from shell.repl.meta import MetaSession

__all__ = ["toolbar"]


def toolbar(session: MetaSession) -> Callable[[], str]:
    """A function prompt_toolkit calls to draw the toolbar."""

    def draw() -> str:
        store = session.store
        limit = f"{session.limit:,}" if session.limit else "off"
        newest = session.newest_version()
        newer = f" (version {newest} is out: \\refresh)" if newest > store.version else ""
        return (
            f" {session.store_dir}  version {store.version}{newer}, {store.shards} shards  |  "
            f"format {session.format}, limit {limit}  |  Tab completes, \\help, Ctrl-D quits"
        )

    return draw
