"""What a load can refuse or skip before Spark starts: the store and the new files.

:func:`precheck_load` lists the job's inputs and reads the store (no JVM), so the
command line answers "the store was made with other shards", "a file is in the way",
"the store is locked by another load" or "nothing new to load" in well under a second
instead of after Spark's start.
"""

from __future__ import annotations

from pathlib import Path

from loaders.job.model import JobSpec
from loaders.listing.identity import scan_inputs
from loaders.load.inputs import list_input_files
from treestore.events import EventSink, Message, as_lines, ignore_events
from treestore.storage.pagestore import PageStore
from treestore.store.lock import check_unlocked
from treestore.store.versions import StoreWriter

__all__ = ["precheck_load"]


def precheck_load(
    job: JobSpec,
    location: str | Path | PageStore,
    on_event: EventSink = ignore_events,
    *,
    reprocess_changed: bool = False,
) -> bool:
    """Check the job's store at ``location`` and its inputs without Spark; return whether
    any file is new.

    Raises what :func:`~loaders.load.driver.run_load` would raise before its Spark work
    (a store of other shards or hash, a location that is a file, a store another live
    process holds locked, an input that cannot be listed). When nothing is new it tells
    ``on_event`` what the load would have said (broken links among the inputs, each
    source's count, changed or moved files, "nothing new to load") and returns False;
    when something is new it says nothing (the load says it) and returns True. Creates nothing.
    """
    said: list[str] = []  # said only when nothing is new; else the load says it
    listed = [list_input_files(source, as_lines(said.append)) for source in job.sources]
    writer = StoreWriter(location, job.shards, job.hash, create=False)
    check_unlocked(writer.pages)  # a load under way: refused now, not after Spark's start
    scan = scan_inputs(job.sources, listed, writer.base.inputs, said.append, reprocess_changed)
    if scan.fresh:
        return True
    for line in [*said, "nothing new to load: the store is unchanged"]:
        on_event(Message(line))
    return False
