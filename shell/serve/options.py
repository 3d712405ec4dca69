"""The service's options (:class:`ServeOptions`), one frozen value the command line builds
once and passes down; each default is defined here once, and the command line shows it.

Importing this module imports nothing of Spark, Starlette or the stores.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_CACHE_MB",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_TIMEOUT",
    "LOOPBACK_HOSTS",
    "ServeOptions",
    "default_max_concurrent",
]

DEFAULT_HOST = "127.0.0.1"
"""Where the service listens unless ``--host`` says otherwise: loopback only."""
DEFAULT_PORT = 8040
DEFAULT_TIMEOUT = 300.0
"""A query's timeout in seconds when the request names none."""
DEFAULT_MAX_TIMEOUT = 3600.0
"""The longest timeout a request may ask for (``--max-timeout``)."""
DEFAULT_CACHE_MB = 256
"""The result cache's bound in MiB (``--cache-mb``; 0: no cache)."""
QUEUE_PER_SLOT = 4
"""Queries that may wait for a slot, per slot of ``--max-concurrent``; past them, 503."""
MAX_FIELD_CHARS = 16_384
"""The longest ``path``, ``rops`` or ``ops`` a request may carry (413 past it)."""
MAX_BODY_BYTES = 65_536
"""The largest ``POST /query`` body (413 past it)."""
BUFFER_CHUNKS = 8
"""Encoded chunks a query may hold for a slow client before it waits (its own bound)."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
"""Addresses only this machine reaches: binding another needs a token or ``--no-auth``."""


def default_max_concurrent() -> int:
    """Queries that run at once by default: two per core."""
    return 2 * (os.cpu_count() or 1)


@dataclass(frozen=True)
class ServeOptions:
    """How ``treestore serve`` runs: where it listens, what it serves, its limits."""

    stores: tuple[tuple[str, str], ...] = ()
    """The served stores as ``(name, location)`` pairs, in the order given."""
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    master: str | None = None
    """The Spark master (``None``: ``$TREESTORE_SPARK_MASTER``, else ``local[*]``)."""
    token: str | None = None
    """The bearer token every API call must carry (``--token-file``'s first line)."""
    no_auth: bool = False
    """Serve a non-loopback address without a token, on purpose (``--no-auth``)."""
    max_concurrent: int = field(default_factory=default_max_concurrent)
    """Queries running at once; more wait in a bounded queue, then 503."""
    max_timeout: float = DEFAULT_MAX_TIMEOUT
    """The longest timeout a query may ask for, in seconds."""
    default_timeout: float = DEFAULT_TIMEOUT
    cache_mb: int = DEFAULT_CACHE_MB
    cors: str | None = None
    """The one origin allowed to call the API from a browser (``None``: no CORS)."""
    max_field_chars: int = MAX_FIELD_CHARS
    max_body_bytes: int = MAX_BODY_BYTES
    buffer_chunks: int = BUFFER_CHUNKS

    @property
    def max_waiting(self) -> int:
        """Queries that may wait for a slot before new ones are refused with 503."""
        return QUEUE_PER_SLOT * self.max_concurrent

    @property
    def loopback(self) -> bool:
        """Whether the service listens on an address only this machine reaches."""
        return self.host in LOOPBACK_HOSTS or self.host.startswith("127.")

    def page_url(self) -> str:
        """The page's address (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"
