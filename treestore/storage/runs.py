"""Runs: immutable sorted sequences of tree entries, stored as checksummed msgpack pages.

A shard's tree is a sorted map ``(parent_id, name) -> (node_id, hits, nodes, data)``:
every node is one entry keyed by its parent's id and its own name, so a node's
children are one contiguous, name-ordered key range (names compare by code
point, which is their UTF-8 byte order). A run stores such entries in pages of
bounded size:

* ``NAME.pages``: the pages, back to back. A page is a msgpack list of columns
  ``[parent_ids, names, node_ids, hits, child_counts, data]``.
* ``NAME.index``: per page its first and last key, offset, length, entry count
  and XXH64 checksum, so finding one child, a name prefix or a name range reads
  only the pages that can hold it; and a Bloom filter of the run's keys (1%
  false positives, :mod:`treestore.storage.keyfilter`), so looking up a key a run
  does not hold reads no page. The
  index carries its own checksum.

What a version's manifest records of a run (:class:`RunSum`: the pages file's size,
the index file's size and the index's checksum) is taken while the run is written.
Since the index holds every page's checksum, the index's checksum plus the pages
file's size cover every byte of the run: a reader compares them when it opens the
run (the index is read anyway), ``check`` reads every page.

The index also says what the run belongs to: its shard and, when the store has an
identity, that identity (the run's *owner*, a plain string the store passes in). A reader
told its shard (and owner) refuses a run that says it belongs elsewhere: a run copied or
moved from another shard or store is never read as this shard's nodes. Runs written
before they said so read as before.

A shard's state is a list of runs, oldest first: the base run holds absolute
values and later (delta) runs hold what later loads added. Reading merges them:
``hits`` and ``nodes`` add up, ``node_id`` is the same in every run, the newest
``data`` wins. Pages go through one LRU cache per process with a byte budget
(:mod:`treestore.storage.page_cache`).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

import msgpack
import numpy as np
import pyarrow as pa

from treestore.arrays import distinct_sorted
from treestore.errors import CorruptPageError
from treestore.storage.entries import (
    ChildColumns,
    Key,
    expand_ranges,
    find_ids,
    insertion_points,
)
from treestore.storage.keyfilter import KeyFilter, KeyHashes
from treestore.storage.page_cache import cache
from treestore.storage.pages import (
    NATIVE_ENTRIES,
    Page,
    PageEncoder,
    columns_of_span,
    int_dtypes,
)
from treestore.storage.pagestore import PageStore
from treestore.storage.run_index import INDEX_FORMAT as _INDEX_FORMAT
from treestore.storage.run_index import check_belongs, parsed_index
from treestore.storage.run_index import checksum as _checksum
from treestore.storage.run_index import checksums as _checksums

__all__ = [
    "Entry",
    "RunReader",
    "RunSum",
    "block_bounds",
    "merge_entries",
    "write_run",
]

Entry = tuple[Key, int, int, int, Any]
"""``(key, node_id, hits, nodes, data)``."""

PAGE_BYTES = 4096
"""The target size of one encoded page (small pages keep random reads cheap)."""
SPAN_PAGES = 8
"""Reading children, a stretch of this many consecutive pages is read and decoded in one go."""


class RunSum(NamedTuple):
    """What a version's manifest records of a run, to find any change to its files.

    Attributes:
        pages_bytes: the size of ``NAME.pages``.
        index_bytes: the size of ``NAME.index``.
        index_checksum: the XXH64 checksum the index carries (over its body, which holds
            each page's checksum: together with ``pages_bytes`` it covers every byte).
    """

    pages_bytes: int
    index_bytes: int
    index_checksum: int

    def to_json(self) -> list[Any]:
        """The manifest form: ``[pages_bytes, index_bytes, "checksum in hex"]``."""
        return [self.pages_bytes, self.index_bytes, f"{self.index_checksum:016x}"]

    @classmethod
    def from_json(cls, doc: Any) -> RunSum:
        """Read the manifest form."""
        pages_bytes, index_bytes, checksum = doc
        return cls(int(pages_bytes), int(index_bytes), int(checksum, 16))


@dataclass(frozen=True)
class RunStats:
    """What a written run holds."""

    name: str
    entries: int
    pages: int
    bytes: int
    sum: RunSum


Columns = tuple[Any, Any, Any, Any, Any, list[Any] | None]
"""Entries as columns: parent ids, names, node ids, hits, child counts (lists or numpy
arrays; names may be an Arrow string array), and data (a list, or ``None`` for none)."""


def write_run(
    page_store: PageStore,
    name: str,
    chunks: Iterable[Columns],
    page_bytes: int = PAGE_BYTES,
    expected: int = 1024,
    keys: KeyFilter | None = None,
    *,
    shard: int | None = None,
    owner: str | None = None,
) -> RunStats:
    """Write sorted entries, given as :data:`Columns` chunks, as run ``name``.

    A run is ``name.pages`` + ``name.index``. ``expected`` (an upper bound of the entry count) sizes
    the Bloom filter; ``keys``: the run's filter, filled already by the caller (who had the
    keys' hashes at hand), instead. ``shard`` and ``owner`` (the store's identity), when
    given, are written into the index as what the run belongs to.
    """
    filled = keys is not None
    keys = keys if keys is not None else KeyFilter.sized(expected)
    with page_store.writer(f"{name}.pages") as out:
        pages, total, size = _write_pages(out, chunks, None if filled else keys, page_bytes)
    body: dict[str, Any] = {
        "format": _INDEX_FORMAT,
        "pages": pages,
        "entries": total,
        "filter": keys.save(),
    }
    if shard is not None:
        body["belongs_to"] = {"shard": shard, **({"owner": owner} if owner else {})}
    index_body = msgpack.packb(body)
    checksum = _checksum(index_body)
    index_file = msgpack.packb([index_body, checksum])
    page_store.write(f"{name}.index", index_file)
    run_sum = RunSum(size, len(index_file), checksum)
    return RunStats(name, total, len(pages), size + len(index_body), run_sum)


def _write_pages(
    out: BinaryIO, chunks: Iterable[Columns], keys: KeyFilter | None, page_bytes: int
) -> tuple[list[list[Any]], int, int]:
    """Write column chunks as pages on ``out``; return (page index rows, entries, bytes).

    Each chunk becomes numpy and Arrow columns once and is cut into pages with
    numpy (a page closes once its estimated size reaches ``page_bytes``), so the
    work per entry is C loops. Keys must be in order; parent ids are checked
    (names within a parent are the caller's word).
    """
    pages: list[list[Any]] = []
    total = offset = 0
    last_parent = -(1 << 62)
    for parents, names, ids, hits, counts, datas in chunks:
        size = len(parents)
        if not size:
            continue
        ints = tuple(np.asarray(c, dtype=np.int64) for c in (parents, ids, hits, counts))
        parent_array = ints[0]
        if parent_array[0] < last_parent or (np.diff(parent_array) < 0).any():
            raise ValueError(f"run entries out of order near parent {parent_array[0]}")
        if isinstance(names, pa.Array):
            name_array = pa.concat_arrays([names]) if names.offset else names
        else:
            name_array = pa.array(names, pa.string())
        last_parent = int(parent_array[-1])
        if keys is not None:
            keys.add(KeyHashes(parent_array, name_array))
        dtypes = int_dtypes(ints)  # type: ignore[arg-type]
        name_offsets = np.frombuffer(name_array.buffers()[1], np.int32, size + 1)
        name_bytes = memoryview(name_array.buffers()[2] or b"")
        has_data = datas is not None and any(d is not None for d in datas)
        width = sum(d.itemsize for d in dtypes) + 4
        ends = name_offsets[1:].astype(np.int64) + width * np.arange(1, size + 1)
        cuts = np.flatnonzero(np.diff(ends // page_bytes, prepend=0)) + 1
        bounds = [0, *[int(c) for c in cuts if c < size], size]
        starts_at = np.array(bounds[:-1], dtype=np.int64)
        ends_at = np.array(bounds[1:], dtype=np.int64) - 1
        firsts, lasts = (
            zip(parent_array[at].tolist(), name_array.take(at).to_pylist(), strict=True)
            for at in (starts_at, ends_at)
        )
        typed = [c.astype(d, copy=False) for c, d in zip(ints, dtypes, strict=True)]
        encoder = PageEncoder(typed, name_offsets, name_bytes)
        for (a, b), first, last in zip(itertools.pairwise(bounds), firsts, lasts, strict=True):
            encoded = encoder.page(a, b, datas[a:b] if has_data else None)  # type: ignore[index]
            pages.append([*first, *last, offset, len(encoded), b - a, _checksum(encoded)])
            out.write(encoded)
            offset += len(encoded)
        total += size
    return pages, total, offset


class RunReader:
    """Reads one run: its index eagerly (small), its pages through the page cache.

    ``expected`` (what the version's manifest records of the run, if it does) is compared
    with the index as it is read, and with the pages file's size when it is opened. A run
    whose index says it belongs to another shard than ``shard`` (when a number), or to
    another store than ``owner`` (when both are known), is refused.
    """

    def __init__(
        self,
        page_store: PageStore,
        name: str,
        shard: int | str = "?",
        expected: RunSum | None = None,
        owner: str | None = None,
    ) -> None:
        self.page_store = page_store
        self.name = name
        self.shard = shard
        self.expected = expected
        where = f"{page_store.location}/{name}.index"
        try:
            data = page_store.read(f"{name}.index")
            index = parsed_index(data)
        except (ValueError, TypeError, KeyError, msgpack.UnpackException) as exc:
            raise CorruptPageError(
                f"Shard {shard}: the run index {where} is damaged ({exc})."
            ) from exc
        self._index = index
        self.pages, self.entries, self.keys = index.pages, index.entries, index.keys
        if expected is not None:
            found = RunSum(self.size_bytes, len(data), index.checksum)
            if found != expected:
                raise CorruptPageError(
                    f"Shard {shard}: the run index {where} is not the one the version's "
                    f"manifest names ({_difference(expected, found)}): the file was replaced "
                    "or damaged; run 'treestore check' on the store."
                )
        check_belongs(index, where, shard, owner)
        self._lasts_columns: ChildColumns | None = None
        self._cache_prefix = (page_store.location, name)
        self._handle: Any = None
        self._local: tuple[Any] | None = None  # the pages file's local path, once looked up

    @property
    def size_bytes(self) -> int:
        """The encoded size of the run's pages."""
        return self._index.pages_bytes

    def page(self, number: int) -> Page:
        """Page ``number``, from the cache or read, checked and decoded."""
        key = (*self._cache_prefix, number)
        found = cache().get(key)
        if found is not None:
            return found
        info = self.pages[number]
        page = self._decoded(number, self._read(info.offset, info.length))
        cache().put(key, page)
        return page

    def all_columns(self, with_data: bool = False) -> ChildColumns:
        """Every entry of the run as columns (with their data when ``with_data``); the page
        cache is left alone. A run of :data:`~treestore.storage.pages.NATIVE_ENTRIES` entries
        or more is read as one span that the compiled decoder writes straight into its
        columns; a smaller one is read and decoded by numpy in blocks of about 2 MB, then
        joined (a third faster than numpy over one span: its index arrays stay in cache)."""
        if self.entries >= NATIVE_ENTRIES:  # the compiled decoder: one span, no joins
            return self.pages_columns(0, len(self.pages), with_data)
        blocks = list(self.column_blocks(with_data))
        if len(blocks) == 1:
            return blocks[0]
        return _joined(blocks) if blocks else ChildColumns.empty()

    def pages_columns(self, start: int, stop: int, with_data: bool = False) -> ChildColumns:
        """The entries of pages ``start`` to ``stop - 1`` as columns (with their data when
        ``with_data``), read in one go and checked; the page cache is left alone."""
        if start >= stop:
            return ChildColumns.empty()
        begin = self.pages[start].offset
        raw = self._read(begin, self.pages[stop - 1].offset + self.pages[stop - 1].length - begin)
        view = memoryview(raw)
        spans = self._index.spans[start:stop]
        starts, ends = spans[:, 0] - begin, spans[:, 0] - begin + spans[:, 1]
        bad = np.flatnonzero(_checksums(view, starts, ends) != self._index.checksums[start:stop])
        if len(bad):  # raises, naming the first page that fails
            first = int(bad[0])
            self._check(start + first, view[starts[first] : ends[first]])
        found = columns_of_span(raw, starts, spans[:, 1], with_data)
        if found is not None:
            ints, names, data = found
            return ChildColumns(ints[0], names, ints[1], ints[2], ints[3], data)
        encoded = [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        pages = [self._decode(n, page) for n, page in enumerate(encoded, start)]
        return _concatenated(pages, [d for p in pages for d in p.data()] if with_data else None)

    def column_blocks(
        self, with_data: bool = False, block_bytes: int = 1 << 21
    ) -> Iterator[ChildColumns]:
        """The run's entries in key order as blocks of consecutive pages of about
        ``block_bytes`` encoded bytes each (what a streaming merge reads); the page cache
        is left alone."""
        for start, stop in block_bounds(self._index.spans[:, 1], block_bytes):
            yield self.pages_columns(start, stop, with_data)

    def _check(self, number: int, encoded: bytes | memoryview) -> None:
        """Raise :class:`CorruptPageError` unless page ``number``'s bytes match its checksum."""
        info = self.pages[number]
        if len(encoded) != info.length or _checksum(encoded) != info.checksum:
            raise CorruptPageError(
                f"Shard {self.shard}: page {number} of "
                f"{self.page_store.location}/{self.name}.pages "
                "fails its checksum (the file is damaged); run 'treestore check' on the store."
            )

    def _decoded(self, number: int, encoded: bytes) -> Page:
        """Check page ``number``'s bytes against its checksum and decode them."""
        self._check(number, encoded)
        return self._decode(number, encoded)

    def _decode(self, number: int, encoded: bytes) -> Page:
        """Decode page ``number``'s checked bytes."""
        try:
            return Page(encoded)
        except (ValueError, TypeError, struct.error, msgpack.UnpackException) as exc:
            raise CorruptPageError(
                f"Shard {self.shard}: page {number} of "
                f"{self.page_store.location}/{self.name}.pages cannot be decoded ({exc})."
            ) from exc

    def _read(self, offset: int, length: int) -> bytes:
        """Read from the pages file, keeping it open when it is local."""
        if self._local is None:
            self._local = (self.page_store.local_path(f"{self.name}.pages"),)
        path = self._local[0]
        if path is None:
            return self.page_store.read_range(f"{self.name}.pages", offset, length)
        try:
            if self._handle is None:
                handle = open(path, "rb")  # noqa: SIM115 - kept open for the reader's life
                try:
                    self._check_size(os.fstat(handle.fileno()).st_size)
                except CorruptPageError:
                    handle.close()
                    raise  # kept closed: the next read checks the size again
                self._handle = handle
            return os.pread(self._handle.fileno(), length, offset)
        except OSError as exc:
            raise CorruptPageError(f"Shard {self.shard}: {path} cannot be read ({exc}).") from exc

    def _check_size(self, size: int) -> None:
        """Raise :class:`CorruptPageError` if the pages file is not the size the manifest
        records (a stat of the open file: it costs nothing)."""
        if self.expected is not None and size != self.expected.pages_bytes:
            raise CorruptPageError(
                f"Shard {self.shard}: {self.page_store.location}/{self.name}.pages is {size:,} "
                f"bytes, the version's manifest says {self.expected.pages_bytes:,} (the file "
                "was cut short or added to); run 'treestore check' on the store."
            )

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.close()

    def get(self, key: Key) -> Entry | None:
        """The entry for ``key`` in this run, if any (reads at most one page)."""
        if not self.keys.holds(key):
            return None
        number = bisect.bisect_left(self._index.lasts, key)
        if number >= len(self.pages) or self.pages[number].first > key:
            return None
        page = self.page(number)
        i = page.find(key)
        if i < len(page) and page.key(i) == key:
            return page.entry(i)
        return None

    def scan(self, start: Key, stop: Key | None = None) -> Iterator[Entry]:
        """Entries with ``start <= key < stop`` in key order, reading only the pages in range."""
        number = bisect.bisect_left(self._index.lasts, start)
        while number < len(self.pages):
            info = self.pages[number]
            if stop is not None and info.first >= stop:
                return
            page = self.page(number)
            i = page.find(start) if info.first < start else 0
            size = len(page)
            while i < size:
                if stop is not None and page.key(i) >= stop:
                    return
                yield page.entry(i)
                i += 1
            number += 1

    def _pages_for(self, parents: np.ndarray) -> np.ndarray:
        """The numbers of the pages that can hold children of ``parents`` (sorted, distinct)."""
        low = np.searchsorted(self._index.last_parents, parents, "left")
        high = np.searchsorted(self._index.first_parents, parents, "right")
        spans = high > low
        marks = np.zeros(len(self.pages) + 1, dtype=np.int64)
        np.add.at(marks, low[spans], 1)
        np.add.at(marks, high[spans], -1)
        return np.flatnonzero(np.cumsum(marks[:-1]) > 0)

    def find_ids(self, hashes: KeyHashes, among: np.ndarray | None = None) -> np.ndarray:
        """The node id of each of the keys ``hashes`` holds in this run, -1 where absent
        (with ``among``, only the keys at those positions are looked for: a tree's later
        runs are asked about the keys its earlier ones did not hold, none taken out).

        Keys whose parent is outside the run's parents (first to last, the run being in
        key order) are not looked for in its filter (47% of the lookups in the runs a load
        of the seed's data into 2 shards spilled: children of nodes born after the run);
        they and the keys the filter rules out read nothing. For the others, the one page
        that can hold each (the first whose last key is not below it) is read, once for all
        the keys it may hold (stretches of consecutive pages in one go, past the cache,
        as :meth:`children_columns` reads them: a load's many keys spread over most of the
        run), and the pages are searched as columns: the work grows with the keys looked
        up, up to the run's size."""
        ids = np.full(len(hashes), -1, dtype=np.int64)
        if not self.pages or not len(hashes):
            return ids
        parents = hashes.parents if among is None else hashes.parents[among]
        lowest, highest = self._index.first_parents[0], self._index.last_parents[-1]
        inside = (parents >= lowest) & (parents <= highest)
        if among is not None:
            among = among[inside]
        elif not inside.all():
            among = np.flatnonzero(inside)
        maybe = np.flatnonzero(self.keys.may_hold(hashes, among))
        if not len(maybe):
            return ids
        wanted = hashes.take(maybe)
        parents, names = wanted.parents, wanted.names
        if not isinstance(names, pa.Array):
            names = pa.array(names, pa.string())
        numbers = insertion_points(self._page_lasts(), parents, names)
        numbers = distinct_sorted(numbers[numbers < len(self.pages)])
        if len(numbers):
            ids[maybe] = find_ids(self._pages_read(numbers), parents, names)
        return ids

    def _page_lasts(self) -> ChildColumns:
        """The pages' last keys as columns (for binary searches of many keys at once)."""
        if self._lasts_columns is None:
            none = np.zeros(len(self.pages), dtype=np.int64)
            names = pa.array([last[1] for last in self._index.lasts], pa.string())
            self._lasts_columns = ChildColumns(self._index.last_parents, names, none, none, none)
        return self._lasts_columns

    def children_columns(self, parents: np.ndarray) -> ChildColumns:
        """The entries whose parent is in ``parents`` (sorted, distinct), as columns in key
        order, reading only the pages that can hold them."""
        numbers = self._pages_for(parents)
        if not len(numbers):
            return ChildColumns.empty()
        read = self._pages_read(numbers)
        starts = np.searchsorted(read.parents, parents, "left")
        return read.take(
            expand_ranges(starts, np.searchsorted(read.parents, parents, "right") - starts)
        )

    def _pages_read(self, numbers: np.ndarray) -> ChildColumns:
        """The entries of pages ``numbers`` (sorted, distinct) as columns: a stretch of at
        least :data:`SPAN_PAGES` consecutive pages is read in one go (and not cached), the
        other pages one by one through the page cache."""
        breaks = np.flatnonzero(np.diff(numbers) != 1) + 1
        bounds = zip(
            np.concatenate([[0], breaks]).tolist(),
            np.concatenate([breaks, [len(numbers)]]).tolist(),
            strict=True,
        )
        parts: list[ChildColumns] = []
        single: list[Page] = []
        for begin, end in bounds:
            if end - begin < SPAN_PAGES:
                single.extend(self.page(int(n)) for n in numbers[begin:end])
                continue
            if single:
                parts.append(_concatenated(single))
                single = []
            parts.append(self.pages_columns(int(numbers[begin]), int(numbers[end - 1]) + 1))
        if single:
            parts.append(_concatenated(single))
        return parts[0] if len(parts) == 1 else _joined(parts)

    def check(self) -> int:
        """Read and verify every page from the file (not the page cache: it holds pages as
        they were when read); return the number of entries."""
        return sum(
            len(self._decoded(number, self._read(info.offset, info.length)))
            for number, info in enumerate(self.pages)
        )


def _difference(expected: RunSum, found: RunSum) -> str:
    """What differs between a run's recorded and found sums, in words."""
    words = []
    if found.index_bytes != expected.index_bytes:
        words.append(f"{found.index_bytes:,} bytes, not {expected.index_bytes:,}")
    if found.index_checksum != expected.index_checksum:
        words.append("another checksum")
    if found.pages_bytes != expected.pages_bytes:
        words.append(f"pages of {found.pages_bytes:,} bytes, not {expected.pages_bytes:,}")
    return ", ".join(words)


def block_bounds(lengths: np.ndarray, block_bytes: int) -> Iterator[tuple[int, int]]:
    """(start, stop) of consecutive blocks of pages with these lengths: each block takes
    pages until it holds ``block_bytes`` bytes or more (at least one page; the last block
    may hold fewer)."""
    ends = np.cumsum(lengths)  # the bytes up to each page's end
    start = 0
    while start < len(lengths):
        before = int(ends[start - 1]) if start else 0
        # through the page that fills the block
        stop = int(np.searchsorted(ends, before + block_bytes)) + 1
        stop = min(max(stop, start + 1), len(lengths))
        yield start, stop
        start = stop


def _joined(parts: list[ChildColumns]) -> ChildColumns:
    """Consecutive stretches of entries as one set of columns (with their data if every
    stretch has it)."""
    data = None
    if all(p.data is not None for p in parts):
        data = [d for p in parts for d in p.data or ()]
    return ChildColumns(
        np.concatenate([p.parents for p in parts]),
        pa.concat_arrays([p.names for p in parts]),
        np.concatenate([p.ids for p in parts]),
        np.concatenate([p.hits for p in parts]),
        np.concatenate([p.counts for p in parts]),
        data,
    )


def _concatenated(pages: list[Page], data: list[Any] | None = None) -> ChildColumns:
    """Consecutive pages' entries as one set of int64 columns."""
    ints = [np.concatenate([p.ints[k] for p in pages]).astype(np.int64) for k in range(4)]
    names = pa.concat_arrays([p.names for p in pages])
    return ChildColumns(ints[0], names, ints[1], ints[2], ints[3], data)


def merge_entries(streams: list[Iterator[Entry]]) -> Iterator[Entry]:
    """Merge key-sorted entry streams, oldest first, adding up the entries of equal keys."""
    if len(streams) == 1:
        yield from streams[0]
        return
    merged = heapq.merge(*streams, key=lambda entry: entry[0])
    current: list[Any] | None = None
    for key, node_id, hits, count, data in merged:
        if current is not None and current[0] == key:
            current[2] += hits
            current[3] += count
            if data is not None:
                current[4] = data
            continue
        if current is not None:
            yield tuple(current)  # type: ignore[misc]
        current = [key, node_id, hits, count, data]
    if current is not None:
        yield tuple(current)  # type: ignore[misc]
