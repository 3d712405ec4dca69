"""What the service serves: the named stores (each read at its newest published version,
one :class:`~query.driver.runner.QueryStore` per version) and the SparkSession, started
in the background so that driver-walked queries are answered at once.

A store's name is never a path: only the names given at start are looked up, so
``../x``, absolute paths and URIs are simply names that are not served.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from query.driver.runner import QueryStore
from shell.serve.cache import ResultCache
from shell.serve.metrics import ServeMetrics
from shell.serve.options import ServeOptions
from shell.serve.running import QueryRun, Slots
from treestore.errors import SparkSetupError, StoreError
from treestore.storage.pagestore import PageStore, page_store_for
from treestore.store.versions import current_version, open_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["ServedStore", "Service", "SparkStarter", "open_served_stores", "store_name"]

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def store_name(location: str) -> str:
    """A store's default name: its folder's (or URI's) last part, e.g. ``store`` for
    ``demo-work/store`` or ``s3://bucket/a/store/``."""
    return location.rstrip("/").rsplit("/", 1)[-1]


class SparkStarter:
    """The service's SparkSession, started in a daemon thread at once; a query that needs
    Spark waits for it (:meth:`session`), ``/health`` shows :attr:`state`."""

    def __init__(self, factory: Callable[[], SparkSession]) -> None:
        self._factory = factory
        self._ready = threading.Event()
        self._session: SparkSession | None = None
        self._error: BaseException | None = None
        self.state = "starting"
        """``starting``, ``up`` or ``failed``."""

    def start(self) -> None:
        """Start the session (and one tiny job, so the first query does not pay Spark's
        warm-up) in a daemon thread."""

        def run() -> None:
            try:
                session = self._factory()
                session.range(1).count()
                self._session, self.state = session, "up"
            except BaseException as exc:  # the queries that need Spark say why
                self._error, self.state = exc, "failed"
            finally:
                self._ready.set()

        threading.Thread(target=run, daemon=True, name="treestore-serve-spark").start()

    def session(self) -> SparkSession:
        """The session, once started (waits for it); raises why it could not start."""
        self._ready.wait()
        if self._session is None:
            raise SparkSetupError(f"Spark could not start: {self._error}")
        return self._session

    def started(self) -> SparkSession | None:
        """The session if it is up now, else ``None`` (never waits)."""
        return self._session


@dataclass
class ServedStore:
    """One served store: its name, location and the handle of its newest version."""

    name: str
    location: str
    pages: PageStore
    handle: QueryStore

    def newest(self, starter: SparkStarter) -> QueryStore:
        """The handle of the newest published version (reads ``CURRENT``; a new handle
        when it moved, so that a query in flight keeps its own). Blocking: call it in a
        thread."""
        number = current_version(self.pages)
        if number != self.handle.version:
            version = open_version(self.pages, number)  # CURRENT read once, above
            self.handle = QueryStore(version, session_factory=starter.session)
        return self.handle


def open_served_stores(
    named: tuple[tuple[str, str], ...], starter: SparkStarter
) -> dict[str, ServedStore]:
    """The stores by name; one :class:`StoreError` (one line) for a name used twice, a
    name that cannot be one, or a location that is not a store."""
    locations: dict[str, str] = {}
    for name, location in named:
        if not _NAME.fullmatch(name):
            raise StoreError(
                f"{name!r} cannot name a store (letters, digits, '_', '.', '-'): "
                f"give it one with --name NAME={location}"
            )
        if name in locations:
            raise StoreError(
                f"two stores are named {name!r} ({locations[name]} and {location}): "
                f"name one with --name NAME={location}"
            )
        locations[name] = location
    served: dict[str, ServedStore] = {}
    for name, location in locations.items():
        pages = page_store_for(location)
        handle = QueryStore(open_version(pages), session_factory=starter.session)
        served[name] = ServedStore(name, location, pages, handle)
    return served


@dataclass
class Service:
    """What the routes share: one per running service."""

    options: ServeOptions
    stores: dict[str, ServedStore]
    starter: SparkStarter
    metrics: ServeMetrics = field(init=False)
    cache: ResultCache = field(init=False)
    slots: Slots = field(init=False)
    runs: set[QueryRun] = field(default_factory=set)
    """The queries streaming now (stopped when the service stops)."""
    stopping: bool = False
    """Whether the service is stopping: a query that gets its slot now is refused."""

    def __post_init__(self) -> None:
        self.metrics = ServeMetrics(self.spark_jobs_running)
        self.cache = ResultCache(self.options.cache_mb)
        self.slots = Slots(self.options.max_concurrent, self.options.max_waiting)

    def spark_jobs_running(self) -> int:
        """Spark jobs running now in the service's session (0 while it is not up)."""
        session = self.starter.started()
        if session is None:
            return 0
        with contextlib.suppress(Exception):  # a session stopping
            return len(session.sparkContext.statusTracker().getActiveJobsIds())
        return 0

    def stop_queries(self) -> None:
        """Stop every query streaming now, and refuse those still waiting for a slot
        (the service is stopping)."""
        self.stopping = True
        for run in list(self.runs):
            run.stop("shutdown")
