"""``treestore serve``: the refusals said before anything starts, then one line saying
where it listens, then the service until Ctrl-C or SIGTERM (running queries cancelled,
exit status 0)."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TextIO

import uvicorn

from shell.serve.options import ServeOptions
from shell.serve.stores import store_name
from treestore.errors import TreestoreError

__all__ = ["named_stores", "read_token", "run_serve"]

_NAMED = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*)=(.+)")
GRACEFUL_SECONDS = 5
"""How long stopping waits for answers under way (their queries are cancelled first)."""


def named_stores(stores: list[str], names: list[str]) -> tuple[tuple[str, str], ...]:
    """The ``(name, location)`` pairs of the positional stores (``NAME=STORE`` or a
    location named by its last part) and the ``--name NAME=STORE`` ones."""
    pairs = []
    for given in stores:
        match = _NAMED.fullmatch(given)
        pairs.append((match[1], match[2]) if match else (store_name(given), given))
    for given in names:
        match = _NAMED.fullmatch(given)
        if match is None:
            raise TreestoreError(f"--name takes NAME=STORE, not {given!r}")
        pairs.append((match[1], match[2]))
    if not pairs:
        raise TreestoreError("name at least one store to serve")
    return tuple(pairs)


def read_token(path: str) -> str:
    """The bearer token: the file's first line (one that cannot be read, or whose first
    line is empty or short, is refused in one line)."""
    try:
        with Path(path).open(encoding="utf-8") as file:
            token = file.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise TreestoreError(f"cannot read the token file {path}: {exc}") from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise TreestoreError(
            f"the token file {path} must hold a token of at least 16 characters without "
            "blanks on its first line"
        )
    return token


def _bind(options: ServeOptions) -> socket.socket:
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say TCP, and without
    # it an answer's headers and body, sent apart, wait ~40 ms for the client's delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((options.host, options.port))
    except OSError as exc:
        sock.close()
        raise TreestoreError(
            f"cannot listen on {options.host}:{options.port}: {exc.strerror}"
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def run_serve(options: ServeOptions, out: TextIO) -> int:
    """Serve until Ctrl-C or SIGTERM; returns the exit status (0)."""
    from shell.serve.app import build_app
    from shell.serve.stores import Service, SparkStarter, open_served_stores
    from treestore.spark import get_session

    if not options.loopback and options.token is None and not options.no_auth:
        raise TreestoreError(
            f"refusing to serve {options.host} (not loopback) without --token-file FILE "
            "(or --no-auth, on purpose)"
        )
    starter = SparkStarter(lambda: get_session(options.master))
    stores = open_served_stores(options.stores, starter)  # refusals before Spark starts
    sock = _bind(options)
    options = dataclasses.replace(options, port=sock.getsockname()[1])
    service = Service(options, stores, starter)
    starter.start()
    config = uvicorn.Config(
        build_app(service),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=GRACEFUL_SECONDS,
    )
    server = StoppingServer(config, service.stop_queries)
    served = ", ".join(f"{s.name} ({s.location})" for s in stores.values())
    print(f"serving {served} at {options.page_url()} (the page and the API)", file=out)
    out.flush()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        session = starter.started()
        if session is not None:
            with contextlib.suppress(Exception):
                session.stop()
    return 0


class StoppingServer(uvicorn.Server):
    """uvicorn's server stopping on Ctrl-C or SIGTERM: queries cancelled first, then a
    graceful stop, and no signal raised again after it (exit status 0)."""

    def __init__(self, config: uvicorn.Config, stop_queries: Callable[[], None]) -> None:
        super().__init__(config)
        self._stop_queries = stop_queries

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """A signal: cancel the queries, then stop (a second Ctrl-C: at once)."""
        self._stop_queries()
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True
