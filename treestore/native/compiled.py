"""The compiled loops of tree building (numba, compiled on first use and cached on disk).

Imported only through :func:`treestore.native.kernels`, which sets where the compiled code
is cached before numba loads. Every function here takes and returns numpy arrays and
does what the numpy function it replaces does, value for value (the tests hold the
numpy versions as oracles). The kernels that put entries in key order live in
:mod:`treestore.native.sorting`; they are named here too.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from treestore.native.sorting import merge_sorted_parts as merge_sorted_parts
from treestore.native.sorting import radix_order as radix_order
from treestore.native.sorting import sort_short_runs as sort_short_runs

_EMPTY = -1
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SALT1 = np.uint64(0x243F6A8885A308D3)
_SALT2 = np.uint64(0x13198A2E03707344)
_S33 = np.uint64(33)
_S32 = np.uint64(32)
_LOW32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def _mix(x: np.uint64) -> np.uint64:
    x = x ^ (x >> _S33)
    x = x * _M1
    x = x ^ (x >> _S33)
    x = x * _M2
    return x ^ (x >> _S33)


@njit(cache=True, nogil=True)
def folded_hashes(parents, offsets, data):  # type: ignore[no-untyped-def]
    """Each key's folded hash (``keyfilter._folded``): the parent id XOR the mixed
    length, then each 8-byte little-endian word of the name (zero padded) XORed in and
    mixed. ``offsets`` (int64, one more than the keys) index the names' UTF-8 ``data``."""
    size = len(parents)
    out = np.empty(size, np.uint64)
    for i in range(size):
        start, stop = offsets[i], offsets[i + 1]
        length = stop - start
        value = np.uint64(parents[i]) ^ _mix(np.uint64(length) * _GOLDEN)
        at = start
        while at < stop:
            word = np.uint64(0)
            end = min(at + 8, stop)
            for k in range(end - at):
                word |= np.uint64(data[at + k]) << np.uint64(8 * k)
            value = _mix(value ^ word)
            at += 8
        out[i] = value
    return out


@njit(cache=True, nogil=True)
def parted_hashes(folded, parents):  # type: ignore[no-untyped-def]
    """``keyfilter._parted``: the folded hashes with the parent id mixed in once more."""
    out = np.empty(len(folded), np.uint64)
    for i in range(len(folded)):
        out[i] = folded[i] ^ _mix(np.uint64(parents[i]) * _GOLDEN + _SALT1)
    return out


@njit(cache=True, nogil=True)
def probe_first(table, held, hashes):  # type: ignore[no-untyped-def]
    """For each hash, the first slot on its probe sequence (linear probing in ``table``,
    whose entries are slots, -1 empty) whose held hash is equal (-1: none), and the
    position after it, to go on probing from when the keys differ."""
    mask = np.uint64(len(table) - 1)
    size = len(hashes)
    slots = np.full(size, _EMPTY, np.int64)
    after = np.zeros(size, np.int64)
    for i in range(size):
        h = hashes[i]
        place = np.int64(h & mask)
        while True:
            found = table[place]
            place = np.int64((np.uint64(place) + np.uint64(1)) & mask)
            if found < 0:
                break
            if held[found] == h:
                slots[i] = found
                after[i] = place
                break
    return slots, after


@njit(cache=True, nogil=True)
def place_slots(table, held, hashes, slots, met_new, met_other):  # type: ignore[no-untyped-def]
    """Write ``slots`` (in order) into the first empty position from each hash's home;
    record in ``met_new``/``met_other`` the pairs of slots with equal hashes passed on the
    way. Returns how many pairs were met (more than the arrays hold: the caller redoes
    the batch another way)."""
    mask = np.uint64(len(table) - 1)
    room = len(met_new)
    met = 0
    for i in range(len(slots)):
        h = hashes[i]
        place = np.int64(h & mask)
        while True:
            found = table[place]
            if found < 0:
                table[place] = slots[i]
                break
            if held[found] == h:
                if met < room:
                    met_new[met] = slots[i]
                    met_other[met] = found
                met += 1
            place = np.int64((np.uint64(place) + np.uint64(1)) & mask)
    return met


@njit(cache=True, nogil=True)
def first_groups(values):  # type: ignore[no-untyped-def]
    """The distinct values of ``values`` in order of first appearance, each one's first
    position, and each value's group (a hash table of int64 values)."""
    size = len(values)
    capacity = 16
    while capacity < 2 * size:
        capacity *= 2
    mask = np.uint64(capacity - 1)
    table = np.full(capacity, _EMPTY, np.int64)
    firsts = np.empty(size, np.int64)
    groups = np.empty(size, np.int64)
    count = 0
    for i in range(size):
        v = values[i]
        place = np.int64(_mix(np.uint64(v)) & mask)
        while True:
            g = table[place]
            if g < 0:
                table[place] = count
                firsts[count] = i
                groups[i] = count
                count += 1
                break
            if values[firsts[g]] == v:
                groups[i] = g
                break
            place = np.int64((np.uint64(place) + np.uint64(1)) & mask)
    return firsts[:count], groups


@njit(cache=True, nogil=True)
def dense_first_inverse(values, low, span):  # type: ignore[no-untyped-def]
    """``unique_first_inverse`` of ``values``, all in ``[low, low + span)``: a table of
    each value's first position over the span, so no sort (for dense values: node ids)."""
    first = np.full(span, _EMPTY, np.int64)
    for i in range(len(values)):
        v = values[i] - low
        if first[v] < 0:
            first[v] = i
    count = 0
    for v in range(span):
        if first[v] >= 0:
            count += 1
    distinct = np.empty(count, np.int64)
    firsts = np.empty(count, np.int64)
    rank = first  # reused: the first position is no longer needed once copied out
    k = 0
    for v in range(span):
        if first[v] >= 0:
            distinct[k] = v + low
            firsts[k] = first[v]
            rank[v] = k
            k += 1
    inverse = np.empty(len(values), np.int64)
    for i in range(len(values)):
        inverse[i] = rank[values[i] - low]
    return distinct, firsts, inverse


@njit(cache=True, nogil=True)
def remap(groups, rank):  # type: ignore[no-untyped-def]
    """``rank[groups]``."""
    out = np.empty(len(groups), np.int64)
    for i in range(len(groups)):
        out[i] = rank[groups[i]]
    return out


@njit(cache=True, nogil=True)
def _counting_order(keys, key_count, positions):  # type: ignore[no-untyped-def]
    """``positions`` reordered by ``keys[position]`` (values below ``key_count``), stably:
    a counting sort."""
    starts = np.zeros(key_count + 1, np.int64)
    for p in positions:
        starts[keys[p] + 1] += 1
    for k in range(key_count):
        starts[k + 1] += starts[k]
    out = np.empty(len(positions), np.int64)
    for p in positions:
        k = keys[p]
        out[starts[k]] = p
        starts[k] += 1
    return out


@njit(cache=True, nogil=True)
def rows_by_block(owners, firsts, sizes, shift, blocks):  # type: ignore[no-untyped-def]
    """The rows (owner, first, size) put in order of their owner's block (``owner >>
    shift``), in row order within a block (one counting sort, each field written as a
    sequential stream per block), and where each block's rows begin (and the last end)."""
    rows = len(owners)
    starts = np.zeros(blocks + 1, np.int64)
    for i in range(rows):
        starts[(owners[i] >> shift) + 1] += 1
    for b in range(blocks):
        starts[b + 1] += starts[b]
    at = starts[:-1].copy()
    owner_out = np.empty(rows, owners.dtype)
    first_out = np.empty(rows, firsts.dtype)
    size_out = np.empty(rows, sizes.dtype)
    for i in range(rows):
        b = owners[i] >> shift
        k = at[b]
        owner_out[k] = owners[i]
        first_out[k] = firsts[i]
        size_out[k] = sizes[i]
        at[b] = k + 1
    return owner_out, first_out, size_out, starts


@njit(cache=True, nogil=True)
def mark_bits(owners, firsts, sizes, ranks, bits, words, begin, end):  # type: ignore[no-untyped-def]
    """Set, for rows ``begin`` to ``end - 1``, the bits of the ranks each views
    (``ranks[firsts[row]:firsts[row] + sizes[row]]``) in its owner's ``words`` 64-bit
    words of ``bits``. Rows of a block of owners together keep those words in the
    cache; threads given different blocks never write the same word."""
    for row in range(begin, end):
        base = owners[row] * words
        f = firsts[row]
        for t in range(f, f + sizes[row]):
            x = ranks[t]
            bits[base + (x >> 6)] |= np.uint64(1) << np.uint64(x & 63)


@njit(cache=True, nogil=True)
def count_bits(bits, words, first, last, counts):  # type: ignore[no-untyped-def]
    """Into ``counts[g]``: the set bits of owner ``g``, for owners ``first`` to ``last - 1``."""
    for g in range(first, last):
        total = 0
        for w in range(words):
            word = bits[g * words + w]
            while word:
                word &= word - np.uint64(1)
                total += 1
        counts[g] = total


@njit(cache=True, nogil=True)
def read_bits(bits, words, first, last, bounds, out):  # type: ignore[no-untyped-def]
    """The set bits of owners ``first`` to ``last - 1`` (``words`` words each), ascending,
    written into ``out`` from ``bounds[g]`` on for owner ``g``."""
    for g in range(first, last):
        at = bounds[g]
        for w in range(words):
            word = bits[g * words + w]
            while word:
                low = word & (~word + np.uint64(1))  # the lowest set bit
                out[at] = w * 64 + _bit_index(low)
                at += 1
                word ^= low


@njit(cache=True, nogil=True)
def text_sizes(bits, words, first, last, lengths, sizes, present):  # type: ignore[no-untyped-def]
    """For owners ``first`` to ``last - 1``: into ``sizes[g]`` the bytes of its set bits'
    words joined by commas (word ``r`` is ``lengths[r]`` bytes), into ``present[g]``
    whether it has any."""
    for g in range(first, last):
        total = 0
        count = 0
        for w in range(words):
            word = bits[g * words + w]
            while word:
                low = word & (~word + np.uint64(1))  # the lowest set bit
                total += lengths[w * 64 + _bit_index(low)]
                count += 1
                word ^= low
        sizes[g] = total + count - 1 if count else 0
        present[g] = count > 0


@njit(cache=True, nogil=True)
def write_text(bits, words, first, last, word_offsets, word_data, offsets, out):  # type: ignore[no-untyped-def]
    """For owners ``first`` to ``last - 1``: the words of its set bits, ascending, joined
    by commas, written into ``out`` from ``offsets[g]`` on (as :func:`text_sizes` sized)."""
    comma = np.uint8(44)
    for g in range(first, last):
        at = offsets[g]
        later = False  # a word was written: a comma before the next
        for w in range(words):
            word = bits[g * words + w]
            while word:
                low = word & (~word + np.uint64(1))
                r = w * 64 + _bit_index(low)
                if later:
                    out[at] = comma
                    at += 1
                later = True
                for k in range(word_offsets[r], word_offsets[r + 1]):
                    out[at] = word_data[k]
                    at += 1
                word ^= low


_DE_BRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DE_BRUIJN_PLACES = np.array(
    [0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4, 62, 55, 59, 36, 53, 51, 43,
     22, 45, 39, 33, 30, 24, 18, 12, 5, 63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44,
     32, 23, 11, 46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6],
    np.int64,
)  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _bit_index(bit: np.uint64) -> int:
    """The position of the one set bit of ``bit`` (a de Bruijn multiplication)."""
    return _DE_BRUIJN_PLACES[(bit * _DE_BRUIJN) >> np.uint64(58)]  # type: ignore[no-any-return]


@njit(cache=True, nogil=True)
def pair_groups(nodes, codes, node_count, code_count):  # type: ignore[no-untyped-def]
    """The distinct pairs ``(nodes[i], codes[i])`` in ascending order (as
    ``node * code_count + code``), each one's first position, and each pair's place among
    them: two stable counting sorts (by code, then by node), then one walk."""
    size = len(nodes)
    by_code = _counting_order(codes, code_count, np.arange(size))
    order = _counting_order(nodes, node_count, by_code)
    groups = np.empty(size, np.int64)
    firsts = np.empty(size, np.int64)
    inverse = np.empty(size, np.int64)
    count = -1
    last_node, last_code = -1, -1
    for k in range(size):
        i = order[k]
        n, c = nodes[i], codes[i]
        if n != last_node or c != last_code:
            count += 1
            groups[count] = n * code_count + c
            firsts[count] = i  # stable: the first of a run is its earliest position
            last_node, last_code = n, c
        inverse[i] = count
    return groups[: count + 1], firsts[: count + 1], inverse


@njit(cache=True, nogil=True, inline="always")
def _filter_place(low: np.uint64, stride: np.uint64, probe: int, size: np.uint64) -> np.int64:
    """Probe ``probe``'s bit: ``low + probe * stride`` in 32 bits, scaled to ``size``."""
    return np.int64((((low + np.uint64(probe) * stride) & _LOW32) * size) >> _S32)


@njit(cache=True, nogil=True, inline="always")
def _filter_start(base: np.uint64) -> tuple[np.uint64, np.uint64]:
    return _mix(base ^ _SALT1) >> _S32, (_mix(base ^ _SALT2) | np.uint64(1)) & _LOW32


@njit(cache=True, nogil=True)
def filter_add(bits, size, bases, probes):  # type: ignore[no-untyped-def]
    """Set each key's ``probes`` bits in the packed (little-endian bit order) filter
    ``bits`` of ``size`` bits, from each key's ``bases`` hash (``KeyFilter.add``)."""
    whole = np.uint64(size)
    for i in range(len(bases)):
        low, stride = _filter_start(bases[i])
        for probe in range(probes):
            place = _filter_place(low, stride, probe, whole)
            bits[place >> 3] |= np.uint8(1 << (place & 7))


@njit(cache=True, nogil=True)
def filter_holds(bits, size, bases, probes):  # type: ignore[no-untyped-def]
    """Whether each key's ``probes`` bits are all set (``KeyFilter.may_hold``)."""
    whole = np.uint64(size)
    held = np.zeros(len(bases), np.bool_)
    for i in range(len(bases)):
        low, stride = _filter_start(bases[i])
        every = True
        for probe in range(probes):
            place = _filter_place(low, stride, probe, whole)
            if not (bits[place >> 3] >> (place & 7)) & 1:
                every = False
                break
        held[i] = every
    return held


@njit(cache=True, nogil=True)
def members(values, candidates):  # type: ignore[no-untyped-def]
    """Whether each of ``values`` is among ``candidates`` (a hash set of int64 values)."""
    capacity = 16
    while capacity < 2 * len(candidates):
        capacity *= 2
    mask = np.uint64(capacity - 1)
    table = np.empty(capacity, np.int64)
    used = np.zeros(capacity, np.bool_)
    for i in range(len(candidates)):
        v = candidates[i]
        place = np.int64(_mix(np.uint64(v)) & mask)
        while used[place] and table[place] != v:
            place = np.int64((np.uint64(place) + np.uint64(1)) & mask)
        used[place] = True
        table[place] = v
    found = np.zeros(len(values), np.bool_)
    for i in range(len(values)):
        v = values[i]
        place = np.int64(_mix(np.uint64(v)) & mask)
        while used[place]:
            if table[place] == v:
                found[i] = True
                break
            place = np.int64((np.uint64(place) + np.uint64(1)) & mask)
    return found


@njit(cache=True, nogil=True)
def dense_members(values, candidates, low, span):  # type: ignore[no-untyped-def]
    """:func:`members` of candidates from ``low`` to ``low + span - 1``: a bitmap over
    their span (an eighth of a byte each) instead of a hash set."""
    bits = np.zeros((span + 7) // 8, np.uint8)
    for i in range(len(candidates)):
        at = candidates[i] - low
        bits[at >> 3] |= np.uint8(1 << (at & 7))
    found = np.zeros(len(values), np.bool_)
    for i in range(len(values)):
        at = values[i] - low
        if 0 <= at < span:
            found[i] = (bits[at >> 3] >> (at & 7)) & 1
    return found


@njit(cache=True, nogil=True)
def decode_pages(  # type: ignore[no-untyped-def]
    words32, words64, raw, sections, counts, flags, names_at, name_sizes, ints, offsets, text
):
    """Decode the entries of pages laid out in ``raw`` (its int32 and int64 views too), as
    :func:`~treestore.storage.pages.columns_of_span` finds their sections, into ``ints``
    (the four int columns, int64), ``offsets`` (the names', int32, from 0 over every page)
    and ``text`` (the names' bytes): each page's written straight into its place."""
    total = len(offsets) - 1
    row = 0
    text_at = 0
    for p in range(len(counts)):
        c = counts[p]
        for k in range(4):
            at = sections[k, p]
            if flags[p] & (1 << k):
                base = at // 4
                for i in range(c):
                    ints[k, row + i] = words32[base + i]
            else:
                base = at // 8
                for i in range(c):
                    ints[k, row + i] = words64[base + i]
        base = sections[4, p] // 4
        for i in range(c):
            offsets[row + i] = words32[base + i] + text_at
        size = name_sizes[p]
        text[text_at : text_at + size] = raw[names_at[p] : names_at[p] + size]
        text_at += size
        row += c
    offsets[total] = text_at


_P1 = np.uint64(11400714785074694791)
_P2 = np.uint64(14029467366897019727)
_P3 = np.uint64(1609587929392839161)
_P4 = np.uint64(9650029242287828579)
_P5 = np.uint64(2870177450012600261)


@njit(cache=True, nogil=True, inline="always")
def _rotl(x: np.uint64, r: int) -> np.uint64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, nogil=True, inline="always")
def _read64(data, at):  # type: ignore[no-untyped-def]
    word = np.uint64(0)
    for k in range(8):
        word |= np.uint64(data[at + k]) << np.uint64(8 * k)
    return word


@njit(cache=True, nogil=True, inline="always")
def _xx_round(acc: np.uint64, lane: np.uint64) -> np.uint64:
    return _rotl(acc + lane * _P2, 31) * _P1


@njit(cache=True, nogil=True, inline="always")
def _xx_merge(acc: np.uint64, lane: np.uint64) -> np.uint64:
    return (acc ^ _xx_round(np.uint64(0), lane)) * _P1 + _P4


@njit(cache=True, nogil=True)
def xxhash64(offsets, data, valid, seed):  # type: ignore[no-untyped-def]
    """XXH64 of each string's UTF-8 bytes with ``seed``, as a signed 64-bit integer (Spark's
    ``xxhash64`` of a string); where ``valid`` is 0 (a null), the seed itself, as Spark
    hashes a null."""
    size = len(offsets) - 1
    out = np.empty(size, np.int64)
    useed = np.uint64(seed)
    for i in range(size):
        if not valid[i]:
            out[i] = seed
            continue
        at, stop = offsets[i], offsets[i + 1]
        length = stop - at
        if length >= 32:
            v1 = useed + _P1 + _P2
            v2 = useed + _P2
            v3 = useed
            v4 = useed - _P1
            while at + 32 <= stop:
                v1 = _xx_round(v1, _read64(data, at))
                v2 = _xx_round(v2, _read64(data, at + 8))
                v3 = _xx_round(v3, _read64(data, at + 16))
                v4 = _xx_round(v4, _read64(data, at + 24))
                at += 32
            h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            h = _xx_merge(h, v1)
            h = _xx_merge(h, v2)
            h = _xx_merge(h, v3)
            h = _xx_merge(h, v4)
        else:
            h = useed + _P5
        h += np.uint64(length)
        while at + 8 <= stop:
            h ^= _xx_round(np.uint64(0), _read64(data, at))
            h = _rotl(h, 27) * _P1 + _P4
            at += 8
        if at + 4 <= stop:
            word = np.uint64(0)
            for k in range(4):
                word |= np.uint64(data[at + k]) << np.uint64(8 * k)
            h ^= word * _P1
            h = _rotl(h, 23) * _P2 + _P3
            at += 4
        while at < stop:
            h ^= np.uint64(data[at]) * _P5
            h = _rotl(h, 11) * _P1
            at += 1
        h ^= h >> np.uint64(33)
        h *= _P2
        h ^= h >> np.uint64(29)
        h *= _P3
        h ^= h >> np.uint64(32)
        out[i] = np.int64(h)
    return out


@njit(cache=True, nogil=True)
def insert_strings(base_offsets, base_data, places, added_offsets, added_data, offsets, out):  # type: ignore[no-untyped-def]
    """The strings of ``base`` with the ``added`` ones inserted, each before base string
    ``places[j]`` (ascending; equal places keep the added ones' order), as ``offsets``
    (int64, one more than all the strings) into ``out``: runs of base strings copied
    whole, their offsets shifted."""
    count = len(base_offsets) - 1
    row = 0
    at = 0
    done = 0  # base strings copied so far
    for j in range(len(places) + 1):
        stop = places[j] if j < len(places) else count
        if stop > done:
            start, end = base_offsets[done], base_offsets[stop]
            out[at : at + end - start] = base_data[start:end]
            for r in range(done, stop):
                offsets[row] = at + base_offsets[r] - start
                row += 1
            at += end - start
            done = stop
        if j < len(places):
            start, end = added_offsets[j], added_offsets[j + 1]
            offsets[row] = at
            out[at : at + end - start] = added_data[start:end]
            at += end - start
            row += 1
    offsets[row] = at


@njit(cache=True, nogil=True)
def insert_ints(base, places, added, out):  # type: ignore[no-untyped-def]
    """``numpy.insert(base, places, added)`` into ``out`` (int64s; ``places`` ascending,
    checked by the caller): runs of base values copied whole."""
    done = 0  # base values copied so far
    row = 0
    for j in range(len(places)):
        stop = places[j]
        if stop > done:
            out[row : row + stop - done] = base[done:stop]
            row += stop - done
            done = stop
        out[row] = added[j]
        row += 1
    out[row : row + len(base) - done] = base[done:]
