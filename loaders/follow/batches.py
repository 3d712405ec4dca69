"""A follower's micro-batches: the files Spark offers at one trigger, loaded as one version.

Each micro-batch (``foreachBatch``) gets the offered files' names; those the source's own
rules accept are handed to the load (:func:`loaders.load.driver.load_listed`, the same
readers, filters, dedup index and trees as ``treestore load``), which applies the
sources in the job's order and publishes at most one version, its micro-batch id in
its report. One line per micro-batch goes out as an event.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from loaders.follow.set_aside import SetAside, unreadable_file
from loaders.job.model import JobSpec
from loaders.listing.files import located
from loaders.load.driver import LoadResult, load_listed
from loaders.load.inputs import InputFile
from loaders.load.options import LoadOptions
from loaders.load.report import StreamBatch
from treestore.errors import LoadError
from treestore.events import EventSink, Message
from treestore.failpoints import failpoint
from treestore.store.versions import StoreWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["STOP_MARK", "FollowSummary", "MicroBatches"]

STOP_MARK = "treestore: stop requested"
"""The error a micro-batch raises when a stop was asked before it began."""


@dataclass
class FollowSummary:
    """What a follower did, for its closing line."""

    batches: int = 0
    files: int = 0
    records: int = 0
    versions: list[int] = field(default_factory=list)
    reason: str = "the stream ended"
    interrupted: bool = False
    """Whether a micro-batch under way was stopped (and published nothing)."""

    def line(self) -> str:
        """One line: batches, files, records, versions published, why it stopped."""
        published = (
            f"versions {self.versions[0]}-{self.versions[-1]}"
            if len(self.versions) > 1
            else f"version {self.versions[0]}"
            if self.versions
            else "no new version"
        )
        return (
            f"followed {self.batches} micro-batch(es): {self.files} file(s), "
            f"{self.records:,} record(s), {published}; stopped: {self.reason}"
        )


def _local_path(uri: str) -> str | None:
    """A path Spark gives (``file:/x/a%20b.tsv``) as the load's local path (None: a URI)."""
    parsed = urlparse(uri)
    return str(Path(unquote(parsed.path)).resolve()) if parsed.scheme in ("", "file") else None


@dataclass
class MicroBatches:
    """One micro-batch at a time: the files Spark offers, loaded as one version."""

    spark: SparkSession
    job: JobSpec
    store: str
    lease: Any
    on_event: EventSink
    options: LoadOptions
    stop: threading.Event
    set_aside: SetAside
    summary: FollowSummary = field(default_factory=FollowSummary)
    busy: threading.Event = field(default_factory=threading.Event)
    failure: BaseException | None = None

    def batch(self, frame: DataFrame, batch_id: int) -> None:
        if self.stop.is_set():  # not committed: Spark offers these files again next time
            raise RuntimeError(STOP_MARK)
        self.busy.set()
        try:
            self._apply(frame, batch_id)
        except BaseException as exc:
            self.failure = exc
            raise
        finally:
            self.busy.clear()

    def _warnings(self, event: Any) -> None:
        """A micro-batch's load says one line (below); its warnings pass through."""
        if isinstance(event, Message) and event.line.startswith("warning"):
            self.on_event(event)

    def _load(self, listed: list[list[InputFile]], batch_id: int, newest: int) -> LoadResult:
        """Load ``listed`` as one version; a file that cannot be read at all is reported,
        set aside (read again once it changes) and the rest loaded without it."""
        while True:
            writer = StoreWriter(
                self.store, self.job.shards, self.job.hash, fence=self.lease.verify
            )
            writer.drop_unpublished()
            try:
                return load_listed(
                    self.spark,
                    self.job,
                    writer,
                    listed,
                    self._warnings,
                    options=self.options,
                    stream=StreamBatch(batch_id, newest),
                )
            except LoadError as exc:
                found = unreadable_file(listed, exc)
                if found is None:
                    raise
                index, input_file, reason = found
                listed[index].remove(input_file)
                self.set_aside.add(index, input_file, reason)
                self.on_event(
                    Message(
                        f"warning: batch {batch_id}: {input_file.path} {reason}: skipped, and "
                        "read again once it changes (the rest of the micro-batch is loaded)"
                    )
                )

    def _apply(self, frame: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        offered: dict[int, list[InputFile]] = {}
        for row in frame.collect():
            path = _local_path(row["path"])
            source = self.job.sources[row["source"]]
            # with its path relative to the source's root: moved files are known by it
            found = located(source, path) if path is not None else None
            if found is not None:  # None: not the source's, or gone since Spark listed it
                offered.setdefault(row["source"], []).append(found)
        for index, input_file in self.set_aside.changed():  # Spark offers a file only once
            again = located(self.job.sources[index], input_file.path)
            if again is not None:
                offered.setdefault(index, []).append(again)
        listed = [
            sorted(offered.get(i, []), key=lambda f: f.path) for i in range(len(self.job.sources))
        ]
        newest = max((f.mtime_ns for files_ in listed for f in files_), default=0)
        result = self._load(listed, batch_id, newest)
        failpoint("follow-after-publish")  # published; Spark has not yet noted the batch
        self.summary.batches += 1
        files = sum(len(f) for f in listed)
        seconds = time.perf_counter() - started
        report = result.load
        if result.version is None or report is None:
            self.on_event(
                Message(f"batch {batch_id}: {files} file(s) offered, nothing new to load")
            )
            return
        read = sum(counts.read for counts in report.sources.values())
        pending = report.pending
        lag = max(0.0, time.time() - newest / 1e9) if newest else 0.0
        loaded = sum(counts.files for counts in report.sources.values())
        known = files - loaded  # offered again, loaded before (by a load or an earlier batch)
        self.summary.files += loaded
        self.summary.records += read
        self.summary.versions.append(result.version)
        kept = (  # only a job with pending (update-only) elements has them to count
            f", pending kept {pending.buffered} / applied {pending.applied} / expired "
            f"{pending.expired}"
            if any(element.pending for element in self.job.elements())
            else ""
        )
        self.on_event(
            Message(
                f"batch {batch_id}: {loaded} file(s)"
                + (f" (and {known} offered that were loaded before)" if known > 0 else "")
                + f", {read:,} record(s){kept}, "
                f"version {result.version}, {seconds:.2f} s, lag {lag:.1f} s"
            )
        )
