"""The page codec: one page of a run as raw column buffers, read without per-entry work.

A page holds consecutive entries of a run as columns: parent ids, node ids,
hits and child counts (little-endian ``int32`` or ``int64``, chosen per column
by the writer), the names as Arrow string buffers (``int32`` offsets and UTF-8
bytes), and, when any entry has one, the data attachments as one msgpack list.
Decoding wraps the buffers in numpy and Arrow arrays (zero copies), so a scan
pays per page, not per entry; Python lists for key lookups are built only when
a lookup asks for them.

Layout (every section starts at a multiple of 8 bytes)::

    header  "TSP2", entries u32, name bytes u32, data bytes u32, flags u8, pad
    parents | ids | hits | counts | name offsets (entries + 1) | names | data

Flag bit ``k`` set means int column ``k`` (parents, ids, hits, counts) is ``int32``.
Pages of the first format (a msgpack list of six columns) are still read.
"""

from __future__ import annotations

import bisect
import struct
from typing import Any

import msgpack
import numpy as np
import pyarrow as pa

from treestore import native
from treestore.arrays import expand_ranges, pooled_empty

__all__ = ["IntColumns", "Page", "PageEncoder", "columns_of_span", "encode_page", "int_dtypes"]

_MAGIC = b"TSP2"
_HEADER = struct.Struct("<4sIIIB3x")  # 20 bytes
_HEADER_SIZE = 24
_HEADER_DTYPE = np.dtype(
    [
        ("magic", "S4"),
        ("count", "<u4"),
        ("names", "<u4"),
        ("data", "<u4"),
        ("flags", "u1"),
        ("pad", "V7"),
    ]
)
"""The header as a numpy record, with its padding (:data:`_HEADER_SIZE` bytes)."""
_INT32 = np.dtype("<i4")
_INT64 = np.dtype("<i8")
_DECODED_FACTOR = 8
"""What a page may take in memory, in times its encoded size, once a lookup has built its
Python lists (the page cache charges this much)."""
IntColumns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Parents, node ids, hits and child counts."""


def _pad(size: int) -> int:
    return (size + 7) & ~7


def int_dtypes(columns: IntColumns) -> tuple[np.dtype, ...]:
    """The narrowest of int32/int64 that holds each column (decided once per chunk)."""
    low, high = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    return tuple(
        _INT32 if not len(c) or (int(c.min()) >= low and int(c.max()) <= high) else _INT64
        for c in columns
    )


def encode_page(
    ints: IntColumns,
    dtypes: tuple[np.dtype, ...],
    offsets: np.ndarray,
    name_bytes: bytes | memoryview,
    data: list[Any] | None,
) -> bytes:
    """One page: ``ints`` sliced to the page, ``offsets`` rebased to 0 (``entries + 1`` of
    them) over ``name_bytes``, and the entries' data (``None`` when every entry has none)."""
    typed = [column.astype(dtype, copy=False) for column, dtype in zip(ints, dtypes, strict=True)]
    return PageEncoder(typed, offsets, name_bytes).page(0, len(ints[0]), data)


class PageEncoder:
    """Pages cut from one chunk of entries: the int columns given once in their page types
    (see :func:`int_dtypes`), the names' int32 offsets (one more than the entries) over
    their bytes; each page is then a header and slices of these buffers."""

    def __init__(
        self, typed: list[np.ndarray], offsets: np.ndarray, name_bytes: bytes | memoryview
    ) -> None:
        self.columns = [
            (memoryview(np.ascontiguousarray(c).data).cast("B"), c.itemsize) for c in typed
        ]
        self.flags = sum(1 << k for k, c in enumerate(typed) if c.dtype == _INT32)
        self.offsets = np.asarray(offsets, dtype=_INT32)
        self.names = memoryview(name_bytes).cast("B")

    def page(self, start: int, stop: int, data: list[Any] | None) -> bytes:
        """The page of entries ``[start, stop)``; ``data`` their attachments, or ``None``."""
        count = stop - start
        data_bytes = msgpack.packb(data) if data is not None else b""
        first, last = int(self.offsets[start]), int(self.offsets[stop])
        header = _HEADER.pack(_MAGIC, count, last - first, len(data_bytes), self.flags)
        parts: list[bytes | memoryview] = [header, _ZEROS[:4]]
        for raw, width in self.columns:
            size = count * width
            parts += [raw[start * width : start * width + size], _ZEROS[: _pad(size) - size]]
        rebased = (self.offsets[start : stop + 1] - first).tobytes()
        parts += [rebased, _ZEROS[: _pad(len(rebased)) - len(rebased)]]
        parts += [self.names[first:last], _ZEROS[: _pad(last - first) - (last - first)]]
        parts += [data_bytes, _ZEROS[: _pad(len(data_bytes)) - len(data_bytes)]]
        return b"".join(parts)


_ZEROS = bytes(8)


def _sections(encoded: bytes) -> tuple[IntColumns, np.ndarray, memoryview, int]:
    """A page's int columns, name offsets and name bytes (no copies), and where its data is."""
    _magic, count, name_size, _data_size, flags = _HEADER.unpack_from(encoded)
    offset = _HEADER_SIZE
    ints = []
    for k in range(4):
        dtype = _INT32 if flags & (1 << k) else _INT64
        ints.append(np.frombuffer(encoded, dtype, count, offset))
        offset += _pad(count * dtype.itemsize)
    offsets = np.frombuffer(encoded, _INT32, count + 1, offset)
    offset += _pad((count + 1) * 4)
    names = memoryview(encoded)[offset : offset + name_size]
    return (ints[0], ints[1], ints[2], ints[3]), offsets, names, offset + _pad(name_size)


NATIVE_ENTRIES = 1 << 14
"""Spans of this many entries and more are decoded by the compiled kernel
(:func:`treestore.native.compiled.decode_pages`); fewer, by numpy (a lookup's few pages
import no numba)."""


def columns_of_span(
    raw: bytes, starts: np.ndarray, lengths: np.ndarray, with_data: bool = False
) -> tuple[IntColumns, pa.Array, list[Any] | None] | None:
    """The entries of consecutive pages laid out in ``raw`` (page ``i`` at byte
    ``starts[i]``, ``lengths[i]`` bytes long) as int64 columns and one name array,
    decoded with array operations over all the pages at once: no Python work per page
    (but one msgpack decode per page that has data, when ``with_data`` asks for each
    entry's data; otherwise the data is None).

    ``None`` when that cannot be done (a page of the first format, pages not on 8-byte
    boundaries, or sections that do not add up to a page's length): the caller then
    decodes page by page, which says what is wrong with a page that is.
    """
    if not len(starts) or len(raw) % 8 or bool((starts % 8).any()):
        return None
    buffer = np.frombuffer(raw, np.uint8)
    if int(starts[-1]) + _HEADER_SIZE > len(buffer):
        return None
    header = buffer[starts[:, None] + np.arange(_HEADER_SIZE)].view(_HEADER_DTYPE)[:, 0]
    if bool((header["magic"] != _MAGIC).any()):
        return None
    counts = header["count"].astype(np.int64)
    flags = header["flags"]
    sections = [starts + _HEADER_SIZE]  # where each int column, then the offsets, start
    for k in range(4):
        sections.append(sections[-1] + ((counts * np.where(flags & (1 << k), 4, 8) + 7) & ~7))
    name_sizes = header["names"].astype(np.int64)
    names_at = sections[4] + (((counts + 1) * 4 + 7) & ~7)
    ends = names_at + ((name_sizes + 7) & ~7) + ((header["data"].astype(np.int64) + 7) & ~7)
    if not np.array_equal(ends, starts + lengths) or int(ends[-1]) > len(buffer):
        return None
    total = int(name_sizes.sum())
    if total >= 1 << 31:
        raise ValueError("more than 2 GB of names in one read")
    words = (np.frombuffer(raw, _INT32), np.frombuffer(raw, _INT64))
    entries = int(counts.sum())
    if entries >= NATIVE_ENTRIES:
        ints = pooled_empty(4 * entries, np.int64).reshape(4, entries)
        offsets = pooled_empty(entries + 1, np.int32)
        text = pooled_empty(total, np.uint8)
        native.kernels().decode_pages(
            words[0], words[1], buffer, np.stack(sections), counts, flags.astype(np.int64),
            names_at, name_sizes, ints, offsets, text,
        )  # fmt: skip
        columns = list(ints)
        names = pa.StringArray.from_buffers(
            len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(text)
        )
    else:
        columns, names = _decoded_columns(raw, words, sections, counts, flags, names_at, name_sizes)
    data: list[Any] | None = None
    if with_data:
        view = memoryview(raw)
        data_sizes = header["data"].astype(np.int64)
        if not data_sizes.any():
            data = [None] * len(names)
        else:
            data = []
            data_at = (names_at + ((name_sizes + 7) & ~7)).tolist()
            try:
                for count, at, size in zip(
                    counts.tolist(), data_at, data_sizes.tolist(), strict=True
                ):
                    found = msgpack.unpackb(view[at : at + size]) if size else [None] * count
                    if not isinstance(found, list) or len(found) != count:
                        return None
                    data.extend(found)
            except (ValueError, TypeError, msgpack.UnpackException):
                return None
    return (columns[0], columns[1], columns[2], columns[3]), names, data


def _decoded_columns(
    raw: bytes,
    words: tuple[np.ndarray, np.ndarray],
    sections: list[np.ndarray],
    counts: np.ndarray,
    flags: np.ndarray,
    names_at: np.ndarray,
    name_sizes: np.ndarray,
) -> tuple[list[np.ndarray], pa.Array]:
    """:func:`columns_of_span`'s int columns and names by numpy gathers (a span of few
    entries; from :data:`NATIVE_ENTRIES` on, the compiled kernel writes them in place)."""
    offsets = np.empty(int(counts.sum()) + 1, dtype=np.int32)
    if bool(((flags & 0xF) == 0xF).all()):
        # every column int32 (the usual case): each column's values sit one padded
        # column further on than the last's, so one index array serves all five
        index = expand_ranges(sections[0] // 4, counts)
        step = np.repeat(((counts * 4 + 7) & ~7) // 4, counts)
        columns = []
        for _ in range(4):
            columns.append(words[0][index].astype(np.int64))
            index += step
        offsets[:-1] = words[0][index]
    else:
        columns = [_gathered(words, sections[k], counts, (flags & (1 << k)) != 0) for k in range(4)]
        offsets[:-1] = words[0][expand_ranges(sections[4] // 4, counts)]
    offsets[:-1] += np.repeat((np.cumsum(name_sizes) - name_sizes).astype(np.int32), counts)
    offsets[-1] = int(name_sizes.sum())
    view = memoryview(raw)
    text = b"".join(
        [view[a : a + n] for a, n in zip(names_at.tolist(), name_sizes.tolist(), strict=True)]
    )
    names = pa.StringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(text))
    return columns, names


def _gathered(
    words: tuple[np.ndarray, np.ndarray], at: np.ndarray, counts: np.ndarray, narrow: np.ndarray
) -> np.ndarray:
    """One int column of every page as int64: ``counts[i]`` values at byte ``at[i]``, int32
    where ``narrow[i]``, else int64."""
    if bool(narrow.all()):
        return words[0][expand_ranges(at // 4, counts)].astype(np.int64)
    if not narrow.any():
        return words[1][expand_ranges(at // 8, counts)]
    out = np.empty(int(counts.sum()), dtype=np.int64)
    places = np.cumsum(counts) - counts
    for size, pages in ((4, narrow), (8, ~narrow)):
        out[expand_ranges(places[pages], counts[pages])] = words[size // 8][
            expand_ranges(at[pages] // size, counts[pages])
        ]
    return out


class Page:
    """A decoded page: numpy/Arrow columns, and Python lists for key lookups on demand."""

    __slots__ = ("_data", "_data_bytes", "_lists", "cost", "ints", "names", "size")

    def __init__(self, encoded: bytes) -> None:
        self.cost = len(encoded) * _DECODED_FACTOR
        self._lists: tuple[list[int], list[str], list[int], list[int], list[int]] | None = None
        self._data: list[Any] | None = None
        if encoded[:4] != _MAGIC:
            self._decode_first_format(encoded)
            return
        ints, offsets, names, data_at = _sections(encoded)
        self.size = count = len(ints[0])
        self.ints: IntColumns = ints
        self.names = pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(names))
        data_size = _HEADER.unpack_from(encoded)[3]
        self._data_bytes = encoded[data_at : data_at + data_size] if data_size else None

    def _decode_first_format(self, encoded: bytes) -> None:
        parents, names, ids, hits, counts, data = msgpack.unpackb(encoded)
        self.size = len(parents)
        self._lists = (parents, names, ids, hits, counts)
        self.ints = tuple(np.asarray(c, dtype=np.int64) for c in (parents, ids, hits, counts))  # type: ignore[assignment]
        self.names = pa.array(names, pa.string())
        self._data = data
        self._data_bytes = None
        self.cost = len(encoded) * _DECODED_FACTOR

    def __len__(self) -> int:
        return self.size

    def data(self) -> list[Any]:
        """Each entry's data attachments (``None`` for most)."""
        if self._data is None:
            raw = self._data_bytes
            self._data = msgpack.unpackb(raw) if raw else [None] * self.size
        return self._data

    def lists(self) -> tuple[list[int], list[str], list[int], list[int], list[int]]:
        """Parents, names, ids, hits, counts as Python lists (built once, for lookups)."""
        if self._lists is None:
            parents, ids, hits, counts = (c.tolist() for c in self.ints)
            self._lists = (parents, self.names.to_pylist(), ids, hits, counts)
        return self._lists

    def find(self, key: tuple[int, str]) -> int:
        """The index of the first entry whose key is ``>= key``."""
        parents, names = self.lists()[:2]
        parent, name = key
        low = bisect.bisect_left(parents, parent)
        high = bisect.bisect_right(parents, parent, low)
        return bisect.bisect_left(names, name, low, high)

    def key(self, i: int) -> tuple[int, str]:
        """Entry ``i``'s key."""
        lists = self.lists()
        return (lists[0][i], lists[1][i])

    def entry(self, i: int) -> tuple[tuple[int, str], int, int, int, Any]:
        """Entry ``i`` as ``(key, node_id, hits, nodes, data)``."""
        parents, names, ids, hits, counts = self.lists()
        return ((parents[i], names[i]), ids[i], hits[i], counts[i], self.data()[i])
