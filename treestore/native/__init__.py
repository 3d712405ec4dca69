"""Compiled kernels for the hot loops of tree building (numba).

The wrappers here take numpy and Arrow arrays and give what the numpy code they replace
gives, value for value. numba is imported on the first call that needs it
(:func:`kernels`), so a process that builds no tree never pays for it. numba caches what
it compiles on disk: in ``NUMBA_CACHE_DIR`` when set, else in a ``treestore/numba``
folder of the user's cache (``XDG_CACHE_HOME``, default ``~/.cache``), so each machine
compiles a kernel once and every later process (a Spark worker too) loads it: about
0.4 s per process, numba's import included.

May import: ``treestore`` (its arrays).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from treestore.arrays import distinct_sorted, map_in_threads, pooled_empty, unique_first_inverse
from treestore.sharding import HASH_SEED

__all__ = [
    "NATIVE_FROM",
    "filter_add",
    "filter_holds",
    "first_inverse_groups",
    "folded_hashes",
    "grouped_distinct_ranks",
    "grouped_distinct_text",
    "inserted_ints",
    "inserted_strings",
    "kernels",
    "key_order",
    "members",
    "merged_parts_order",
    "pair_groups",
    "parted_hashes",
    "repeats",
    "shards_of",
    "string_buffers",
    "warm",
    "xxhash64",
]

NATIVE_FROM = 64
"""Arrays from this many values go through the compiled kernels; smaller ones stay with
numpy (a handful of keys imports no numba)."""

_DENSE_SPAN = 4
"""Values spanning less than this many times their count are grouped through a table over
their span (:func:`first_inverse_groups`) instead of a hash table and a sort."""

_DENSE_BITS = 64
"""Candidates spanning less than this many values each are looked up in a bitmap over
their span (:func:`members`): at most 8 bytes a candidate, as the hash set takes."""

BLOCK_BYTES = 1 << 19
"""The bitsets of a block of groups that :func:`grouped_distinct_ranks` marks together:
half of one core's second-level cache here (1 MB)."""


_loaded: ModuleType | None = None


def kernels() -> ModuleType:
    """The compiled kernels' module (:mod:`treestore.native.compiled`), numba imported and
    its cache folder set on the first call."""
    global _loaded
    if _loaded is None:
        if not os.environ.get("NUMBA_CACHE_DIR"):
            home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            os.environ["NUMBA_CACHE_DIR"] = str(Path(home) / "treestore" / "numba")
        from treestore.native import compiled

        _loaded = compiled
    return _loaded


def repeats(values: np.ndarray) -> bool:
    """Whether some value of ``values`` comes twice."""
    if len(values) < NATIVE_FROM:
        return len(distinct_sorted(values)) < len(values)
    return len(kernels().first_groups(_int64s(values))[0]) < len(values)


def _int64s(values: np.ndarray) -> np.ndarray:
    """``values`` as one contiguous int64 array (one type: one compiled kernel)."""
    return np.ascontiguousarray(values, dtype=np.int64)


def warm() -> None:
    """Compile every kernel now (on tiny arrays), so that they are in the disk cache
    before a load's workers need them: about 3-4 s once per machine (``make`` runs it
    after installing), against 0.4 s for a process that finds them cached."""
    values = np.arange(NATIVE_FROM, dtype=np.int64)
    compiled = kernels()
    compiled.first_groups(values)
    compiled.remap(values, values)
    compiled.dense_first_inverse(values, 0, NATIVE_FROM)
    compiled.pair_groups(values, values, NATIVE_FROM, NATIVE_FROM)
    grouped_distinct_ranks(values, values, values % 2, values.astype(np.int32), NATIVE_FROM)
    grouped_distinct_text(
        values, values, values % 2, values.astype(np.int32), NATIVE_FROM,
        pa.array([str(v) for v in range(NATIVE_FROM)]),
    )  # fmt: skip
    compiled.members(values, values)
    compiled.dense_members(values, values, 0, NATIVE_FROM)
    key_order(values % 3, pa.array([str(v) for v in range(NATIVE_FROM)]))
    merged_parts_order(values, pa.array([str(v) for v in range(NATIVE_FROM)]), [NATIVE_FROM])
    bits = np.zeros(NATIVE_FROM, np.uint8)
    filter_add(bits, 8 * NATIVE_FROM, values.astype(np.uint64), 7)
    filter_holds(bits, 8 * NATIVE_FROM, values.astype(np.uint64), 7)
    text = np.frombuffer(bytes(NATIVE_FROM), np.uint8)  # read-only, as Arrow's buffers are
    hashes = compiled.folded_hashes(values, np.arange(NATIVE_FROM + 1, dtype=np.int64), text)
    compiled.parted_hashes(hashes, values)
    table = np.full(4 * NATIVE_FROM, -1, np.int64)
    held = np.zeros(2 * NATIVE_FROM, np.uint64)
    compiled.place_slots(table, held, held[:1], values[:1], values[:1].copy(), values[:1].copy())
    compiled.probe_first(table, held, held[:1])
    compiled.xxhash64(np.arange(NATIVE_FROM + 1, dtype=np.int64), text, text, 42)
    inserted_strings(pa.array(["a", "c"]), np.array([1]), pa.array(["b"]))
    inserted_ints(values, values[:1], values[:1])
    raw = bytes(64)  # a page span's views are read-only, as columns_of_span gives them
    one, none = np.ones(1, np.int64), np.zeros(1, np.int64)
    compiled.decode_pages(
        np.frombuffer(raw, np.int32), np.frombuffer(raw, np.int64), np.frombuffer(raw, np.uint8),
        np.zeros((5, 1), np.int64), one, none, none, none,
        pooled_empty(4, np.int64).reshape(4, 1), pooled_empty(2, np.int32),
        pooled_empty(0, np.uint8),
    )  # fmt: skip


def string_buffers(names: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string array's offsets into its bytes (int64, one more than the values) and its
    UTF-8 bytes (uint8), for the kernels; only the offsets are copied."""
    size, buffers = len(names), names.buffers()
    wide = pa.types.is_large_string(names.type) or pa.types.is_large_binary(names.type)
    kind = np.int64 if wide else np.int32
    offsets = np.frombuffer(buffers[1], kind, size + 1, names.offset * kind(0).itemsize)
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(buffers[2] or b"", np.uint8)
    data.flags.writeable = False  # one type for every buffer: one compiled kernel
    return offsets, data


def folded_hashes(parents: np.ndarray, names: pa.Array) -> np.ndarray:
    """Each key's folded hash (:meth:`~treestore.storage.keyfilter.KeyHashes.folded`)."""
    offsets, data = string_buffers(names)
    return kernels().folded_hashes(_int64s(parents), offsets, data)


def parted_hashes(folded: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """The key index's hashes from the folded ones
    (:meth:`~treestore.storage.keyfilter.KeyHashes.indexed`)."""
    return kernels().parted_hashes(np.ascontiguousarray(folded), _int64s(parents))


def pair_groups(
    nodes: np.ndarray, codes: np.ndarray, node_count: int, code_count: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~treestore.arrays.unique_first_inverse` of ``nodes * code_count + codes``
    (``nodes`` below ``node_count``, ``codes`` below ``code_count``); from
    :data:`NATIVE_FROM` values on by two counting sorts instead of a comparison sort."""
    if len(nodes) < NATIVE_FROM:
        return unique_first_inverse(nodes * code_count + codes)
    nodes, codes = _int64s(nodes), _int64s(codes)
    for values, count in ((nodes, node_count), (codes, code_count)):
        if values.min() < 0 or values.max() >= count:  # the kernel indexes without checks
            raise ValueError(f"pair_groups: a value out of [0, {count})")
    return kernels().pair_groups(nodes, codes, node_count, code_count)


def grouped_distinct_ranks(
    owners: np.ndarray,
    firsts: np.ndarray,
    sizes: np.ndarray,
    ranks: np.ndarray,
    groups: int,
    pieces: int = 1,
    block_bytes: int = BLOCK_BYTES,
) -> tuple[np.ndarray, np.ndarray]:
    """Per group (below ``groups``), the distinct values among its rows' stretches of
    ``ranks`` (row ``i`` belongs to group ``owners[i]`` and views ``ranks[firsts[i]:
    firsts[i] + sizes[i]]``), ascending: each group's ranks are set as bits of a bitset
    (``groups`` times the ranks' span over 8 bytes in all: the caller keeps that small),
    then the bits are read out. The rows are first put in order of blocks of groups
    whose bitsets take ``block_bytes`` (they stay in the cache while their rows mark
    them); the blocks are marked, and the groups read, in ``pieces`` threads. Gives every
    group's ranks one after the other (int32) and where each group's begin (and the
    last one's end).

    >>> ranks, bounds = grouped_distinct_ranks(
    ...     np.array([1, 0, 1]), np.array([0, 2, 3]), np.array([2, 1, 2]),
    ...     np.array([4, 2, 2, 2, 0]), 3)
    >>> ranks.tolist(), bounds.tolist()
    ([2, 0, 2, 4], [0, 1, 4, 4])
    """
    bits, words, cuts = _marked(owners, firsts, sizes, ranks, groups, pieces, block_bytes)
    compiled = kernels()
    threads = len(cuts) - 1
    bounds = np.zeros(groups + 1, np.int64)
    counts = bounds[1:]
    map_in_threads(
        lambda i: compiled.count_bits(bits, words, cuts[i], cuts[i + 1], counts), range(threads)
    )
    np.cumsum(counts, out=counts)
    out = pooled_empty(int(bounds[-1]), np.int32)
    map_in_threads(
        lambda i: compiled.read_bits(bits, words, cuts[i], cuts[i + 1], bounds, out),
        range(threads),
    )
    return out, bounds


def grouped_distinct_text(
    owners: np.ndarray,
    firsts: np.ndarray,
    sizes: np.ndarray,
    ranks: np.ndarray,
    groups: int,
    words: pa.Array,
    pieces: int = 1,
    block_bytes: int = BLOCK_BYTES,
) -> pa.Array:
    """:func:`grouped_distinct_ranks` given as text: per group the ``words`` its distinct
    ranks stand for (``words`` in rank order, no nulls), ascending, joined by ``,``; null
    for a group without any. The bits are read out straight into the text (no list of
    ranks is made, no word taken twice): ``string``, or ``large_string`` when the text
    outgrows it.

    >>> grouped_distinct_text(
    ...     np.array([1, 0, 1]), np.array([0, 2, 3]), np.array([2, 1, 2]),
    ...     np.array([4, 2, 2, 2, 0]), 3, pa.array(["a", "b", "c", "d", "e"])).to_pylist()
    ['c', 'a,c,e', None]
    """
    if words.null_count or (len(ranks) and int(ranks.max()) >= len(words)):
        raise ValueError("grouped_distinct_text: a rank without its word, or a null word")
    bits, span, cuts = _marked(owners, firsts, sizes, ranks, groups, pieces, block_bytes)
    compiled = kernels()
    threads = len(cuts) - 1
    word_offsets, word_data = string_buffers(words)
    lengths = np.diff(word_offsets)
    offsets = np.zeros(groups + 1, np.int64)
    present = np.zeros(groups, np.bool_)
    map_in_threads(
        lambda i: compiled.text_sizes(
            bits, span, cuts[i], cuts[i + 1], lengths, offsets[1:], present
        ),
        range(threads),
    )  # fmt: skip
    np.cumsum(offsets, out=offsets)
    large = int(offsets[-1]) >= 1 << 31
    out = pooled_empty(int(offsets[-1]), np.uint8)
    map_in_threads(
        lambda i: compiled.write_text(
            bits, span, cuts[i], cuts[i + 1], word_offsets, word_data, offsets, out
        ),
        range(threads),
    )  # fmt: skip
    kind, offset_kind = (pa.large_string(), np.int64) if large else (pa.string(), np.int32)
    missing = groups - int(np.count_nonzero(present))
    valid = pa.array(present).buffers()[1] if missing else None
    buffers = [valid, pa.py_buffer(offsets.astype(offset_kind)), pa.py_buffer(out)]
    return pa.Array.from_buffers(kind, groups, buffers, missing)


def _marked(
    owners: np.ndarray,
    firsts: np.ndarray,
    sizes: np.ndarray,
    ranks: np.ndarray,
    groups: int,
    pieces: int,
    block_bytes: int,
) -> tuple[np.ndarray, int, np.ndarray]:
    """Each group's bitset of its rows' ranks (see :func:`grouped_distinct_ranks`), its
    words per group, and the groups' cuts between the threads that read them."""
    if len(owners) and (int(owners.min()) < 0 or int(owners.max()) >= groups):
        raise ValueError(f"grouped_distinct_ranks: an owner out of [0, {groups})")
    small = len(ranks) < 1 << 31 and groups < 1 << 31
    kind = np.int32 if small else np.int64
    owners, firsts, sizes = (np.ascontiguousarray(a, dtype=kind) for a in (owners, firsts, sizes))
    ranks = np.ascontiguousarray(ranks, dtype=np.int32)
    words = (int(ranks.max(initial=0)) >> 6) + 1
    shift = max(0, (block_bytes // (words * 8)).bit_length() - 1)  # 2**shift groups a block
    blocks = (max(groups, 1) - 1 >> shift) + 1
    compiled = kernels()
    owners, firsts, sizes, starts = compiled.rows_by_block(owners, firsts, sizes, shift, blocks)
    bits = pooled_empty(groups * words, np.uint64)
    bits.fill(0)
    threads = max(1, pieces)
    block_cuts = np.searchsorted(starts, np.linspace(0, len(owners), threads + 1))
    block_cuts[0], block_cuts[-1] = 0, blocks
    map_in_threads(
        lambda i: compiled.mark_bits(
            owners, firsts, sizes, ranks, bits, words,
            starts[block_cuts[i]], starts[block_cuts[i + 1]],
        ),
        range(threads),
    )  # fmt: skip
    return bits, words, np.linspace(0, groups, threads + 1).astype(np.int64)


def _check_places(places: np.ndarray, added: int, base: int, kernel: str, what: str) -> None:
    """Refuse insertion ``places`` the kernels would copy out of bounds with (they copy
    without checks): one per added value, ascending, within the base."""
    if len(places) != added or (
        len(places) and (places[0] < 0 or places[-1] > base or bool(np.any(np.diff(places) < 0)))
    ):
        raise ValueError(f"{kernel}: places must ascend within the base, one a {what}")


def inserted_ints(base: np.ndarray, places: np.ndarray, added: np.ndarray) -> np.ndarray:
    """``numpy.insert(base, places, added)`` for int64 columns with ``places`` ascending
    (within the base), by a compiled kernel that copies the runs of base values between
    them whole: a merge's four columns in about a tenth of ``numpy.insert``'s time (which
    sorts the places and builds a mask for each).

    >>> inserted_ints(np.array([1, 3]), np.array([1, 2]), np.array([2, 4])).tolist()
    [1, 2, 3, 4]
    """
    _check_places(places, len(added), len(base), "inserted_ints", "value")
    out = np.empty(len(base) + len(added), np.int64)
    held = _int64s(base).view()  # read-only, as a mapped run's are: one compiled signature
    held.flags.writeable = False
    kernels().insert_ints(held, _int64s(places), _int64s(added), out)
    return out


def inserted_strings(base: pa.Array, places: np.ndarray, added: pa.Array) -> pa.Array:
    """``base`` (strings or binaries, no nulls) with each of ``added`` (no nulls) inserted
    before base value ``places[j]`` (ascending; at ``len(base)``: at the end), as
    ``numpy.insert`` does it for numbers: one pass that copies runs of base values whole.
    The type is ``base``'s, or its large form when the bytes outgrow it (callers that must
    keep the type check the size first).

    >>> inserted_strings(pa.array(["a", "c"]), np.array([1, 2]), pa.array(["b", "d"])).to_pylist()
    ['a', 'b', 'c', 'd']
    """
    if base.null_count or added.null_count:
        raise ValueError("inserted_strings: nulls are not taken")
    _check_places(places, len(added), len(base), "inserted_strings", "string")
    base_offsets, base_data = string_buffers(base)
    added_offsets, added_data = string_buffers(added)
    size = int(base_offsets[-1] - base_offsets[0] + added_offsets[-1] - added_offsets[0])
    offsets = np.empty(len(base) + len(added) + 1, np.int64)
    out = pooled_empty(size, np.uint8)
    kernels().insert_strings(
        base_offsets, base_data, _int64s(places), added_offsets, added_data, offsets, out
    )
    wide = pa.types.is_large_string(base.type) or pa.types.is_large_binary(base.type)
    wide = wide or size >= 1 << 31
    if pa.types.is_binary(base.type) or pa.types.is_large_binary(base.type):
        kind = pa.large_binary() if wide else pa.binary()
    else:
        kind = pa.large_string() if wide else pa.string()
    bounds = offsets if wide else offsets.astype(np.int32)
    return pa.Array.from_buffers(
        kind, len(offsets) - 1, [None, pa.py_buffer(bounds), pa.py_buffer(out)]
    )


def xxhash64(strings: pa.Array, seed: int) -> np.ndarray:
    """Spark's ``xxhash64(strings)`` with ``seed``: XXH64 of each string's UTF-8 bytes as a
    signed 64-bit integer, a null hashed to the seed itself."""
    offsets, data = string_buffers(strings)
    valid = strings.is_valid().to_numpy(zero_copy_only=False).view(np.uint8)
    return kernels().xxhash64(offsets, data, np.ascontiguousarray(valid), seed)  # type: ignore[no-any-return]


def shards_of(keys: pa.Array, shards: int) -> np.ndarray:
    """The shard of each of ``keys`` (strings; nulls allowed), as
    :func:`~treestore.sharding.shard_of` gives it (Spark's ``pmod(xxhash64(key), shards)``).

    >>> from treestore.sharding import shard_of
    >>> shards_of(pa.array(["12345", None]), 8).tolist() == [shard_of("12345", 8), 42 % 8]
    True
    """
    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    if pa.types.is_large_string(keys.type):
        keys = keys.cast(pa.string())
    return np.mod(xxhash64(keys, HASH_SEED), shards).astype(np.int32)  # type: ignore[no-any-return]


_SHORT_RUN = 32
"""Runs of equal parents up to this long have their names sorted by insertion in
:func:`key_order`; longer ones (the root's children) by Arrow."""


def key_order(parents: np.ndarray, names: pa.Array) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """The stable order that sorts entries by parent id, then name (Arrow's
    ``sort_indices`` of the two columns), with the parents and the names in that order.

    From :data:`NATIVE_FROM` entries on: a radix sort of the parent ids, the names taken
    in that order (children of one parent side by side), and each parent's children
    sorted by name where they lie (bytewise, by insertion; a long run by Arrow). A 10x
    shard's memtable of 4.9M entries: about 0.7 s against Arrow's two-key sort's 1.1 s.

    >>> order, _, sorted_names = key_order(np.array([2, 1, 2]), pa.array(["b", "z", "a"]))
    >>> order.tolist(), sorted_names.to_pylist()
    ([1, 2, 0], ['z', 'a', 'b'])
    """
    parents = _int64s(parents)
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks()
    if len(parents) < NATIVE_FROM or names.null_count:
        order = pc.sort_indices(
            pa.table({"parent": parents, "name": names}),
            [("parent", "ascending"), ("name", "ascending")],
        ).to_numpy()
        return order, parents[order], names.take(pa.array(order))
    low, high = int(parents.min()), int(parents.max())
    by_parent, keys = kernels().radix_order(parents, low, max(1, (high - low).bit_length()))
    gathered = names.take(pa.array(by_parent))
    offsets, data = string_buffers(gathered)
    perm, longer = kernels().sort_short_runs(keys, offsets, data, _SHORT_RUN)
    for start, end in longer.reshape(-1, 2).tolist():
        perm[start:end] = start + pc.sort_indices(gathered.slice(start, end - start)).to_numpy()
    return by_parent[perm], keys[perm] + low, gathered.take(pa.array(perm))


def merged_parts_order(parents: np.ndarray, names: pa.Array, sizes: list[int]) -> np.ndarray:
    """The stable order that sorts entries ``(parents[i], names[i])`` by key, given that they
    are parts of ``sizes`` entries one after another, each already in key order (a tree's
    runs): the parts merged pairwise in one compiled pass a level, each part read in
    order; of equal keys, the earlier part's first (as :func:`key_order` of all of them
    gives it, without sorting).

    >>> merged_parts_order(np.array([1, 2, 1, 2]), pa.array(["b", "a", "a", "a"]), [2, 2]).tolist()
    [2, 0, 1, 3]
    """
    bounds = np.cumsum([0, *sizes], dtype=np.int64)
    if bounds[-1] != len(parents) or len(names) != len(parents) or names.null_count:
        raise ValueError("merged_parts_order: parts of the entries' size, a name each, none null")
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks()
    offsets, data = string_buffers(names)
    return kernels().merge_sorted_parts(_int64s(parents), offsets, data, bounds)  # type: ignore[no-any-return]


def filter_add(bits: np.ndarray, size: int, bases: np.ndarray, probes: int) -> None:
    """Set each key's ``probes`` Bloom filter bits in the packed filter ``bits`` (uint8,
    little-endian bit order, ``size`` bits), probing from each key's ``bases`` hash as
    :class:`~treestore.storage.keyfilter.KeyFilter` does. One pass over the keys, in
    place: the packed filter is an eighth of a byte per bit (a 10x shard's run's filter
    stays in the cache while it fills)."""
    _check_filter(bits, size)
    kernels().filter_add(bits, size, np.ascontiguousarray(bases, np.uint64), probes)


def filter_holds(bits: np.ndarray, size: int, bases: np.ndarray, probes: int) -> np.ndarray:
    """Whether each key's ``probes`` bits are all set in the packed filter ``bits`` (see
    :func:`filter_add`)."""
    _check_filter(bits, size)
    read_only = bits.view()  # one compiled signature for a filter read and one being built
    read_only.flags.writeable = False
    return kernels().filter_holds(read_only, size, np.ascontiguousarray(bases, np.uint64), probes)  # type: ignore[no-any-return]


def _check_filter(bits: np.ndarray, size: int) -> None:
    if bits.dtype != np.uint8 or not bits.flags.c_contiguous or len(bits) * 8 < size:
        raise ValueError(f"a filter of {size} bits needs {(size + 7) // 8} contiguous bytes")


def members(values: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is among ``candidates`` (``np.isin``); from
    :data:`NATIVE_FROM` values on by a bitmap over the candidates' span when it is less
    than :data:`_DENSE_BITS` bits a candidate (a memtable's parent ids: the hash set of a
    10x shard's 7M outgrows the cache), else by a hash set."""
    if len(values) < NATIVE_FROM:
        return np.isin(values, candidates)
    values, candidates = _int64s(values), _int64s(candidates)
    if len(candidates):
        low, high = int(candidates.min()), int(candidates.max())
        if high - low < _DENSE_BITS * len(candidates):  # node ids: a bitmap over their span
            return kernels().dense_members(values, candidates, low, high - low + 1)  # type: ignore[no-any-return]
    return kernels().members(values, candidates)


def first_inverse_groups(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~treestore.arrays.unique_first_inverse` (the distinct values sorted, the first
    position of each, each value's place among them); from :data:`NATIVE_FROM` values on
    by a hash table, so that only the distinct values are sorted."""
    if len(values) < NATIVE_FROM:
        return unique_first_inverse(values)
    values = _int64s(values)
    low, high = int(values.min()), int(values.max())
    if high - low < _DENSE_SPAN * len(values):  # dense (node ids): a table, no sort
        return kernels().dense_first_inverse(values, low, high - low + 1)  # type: ignore[no-any-return]
    firsts, groups = kernels().first_groups(values)
    distinct = values[firsts]
    order = np.argsort(distinct)
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    return distinct[order], firsts[order], kernels().remap(groups, rank)
