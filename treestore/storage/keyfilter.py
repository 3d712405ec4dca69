"""A run's key filter: a Bloom filter of its keys, hashed and filled as arrays.

A run's index holds a filter of the run's ``(parent id, name)`` keys, so looking up a
key the run does not hold reads none of its pages (about 1% of absent keys pass).
Keys are hashed many at a time (:class:`KeyHashes`): a name's UTF-8 bytes, zero
padded to whole 8-byte words, are folded word by word with the parent id and the
byte length through the MurmurHash3 finalizer, in numpy, whatever the batch; all-ASCII
names get their padded words from one Arrow kernel (``utf8_rpad``). The filter sets
7 bits per key in 10 bits per expected key, probing ``a + i * b`` in 32 bits (``a``, ``b``
from the key's two hashes). Filters of kind ``treestore-key-filter-2`` take the two
hashes from :meth:`KeyHashes.indexed`, where the parent id is mixed in once more; the
first kind took them from the folded hash alone, in which keys whose parent ids differ
as their names' first bytes do collide (they pass each other's filters; still read).

Runs written before (index format 1) hold an ``rbloom`` filter of each key's XXH3
hash, computed one key at a time; they are read as before (:class:`LegacyFilter`).

>>> hashes = KeyHashes(np.array([0, 0, 5]), ["a", "ab", "é"])
>>> built = KeyFilter.sized(2)
>>> built.add(hashes.take(np.array([0, 2])))
>>> KeyFilter.load(built.save()).may_hold(hashes).tolist()
[True, False, True]
>>> [KeyFilter.load(built.save()).holds(k) for k in [(0, "a"), (0, "ab")]]
[True, False]
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from rbloom import Bloom

from treestore import native
from treestore.storage.entries import Key

__all__ = [
    "FILTER_FORMAT",
    "KeyFilter",
    "KeyHashes",
    "LegacyFilter",
    "fold_key",
    "index_key",
    "load_filter",
]

FILTER_FORMAT = "treestore-key-filter-2"
"""What a run index of format 2 records as the kind of the filters written now."""
_FOLDED_ONLY = "treestore-key-filter-1"
"""The first kind: probes from the folded hash alone (runs written before still hold it)."""
_KINDS = (FILTER_FORMAT, _FOLDED_ONLY)
_BITS_PER_KEY = 10
_PROBES = 7
_MAX_BITS = (1 << 32) - 1  # probe positions are 32-bit
_WORD_COLUMNS = 4  # names of up to 32 bytes are folded from one matrix of words
_ONE_BY_ONE = 4096  # names of more words (32 KiB) are folded one by one, in Python ints
_U64 = (1 << 64) - 1
_M1, _M2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53
_GOLDEN = 0x9E3779B97F4A7C15
_SALT1, _SALT2 = 0x243F6A8885A308D3, 0x13198A2E03707344


def _mix(x: np.ndarray) -> np.ndarray:
    """The MurmurHash3 64-bit finalizer, elementwise (uint64, wrapping)."""
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(_M1)
    x = x ^ (x >> np.uint64(33))
    x = x * np.uint64(_M2)
    return x ^ (x >> np.uint64(33))


def _mix_one(x: int) -> int:
    """:func:`_mix` of one Python int."""
    x ^= x >> 33
    x = (x * _M1) & _U64
    x ^= x >> 33
    x = (x * _M2) & _U64
    return x ^ (x >> 33)


def _word_matrix(names: pa.Array, lengths: np.ndarray, width: int) -> np.ndarray:
    """The names' UTF-8 bytes zero padded to ``width`` bytes each, as an (n, width / 8)
    matrix of little-endian words."""
    size = len(names)
    if size and pc.all(pc.string_is_ascii(names)).as_py():
        padded = pc.utf8_rpad(names, width=width, padding="\x00")
        offsets = np.frombuffer(padded.buffers()[1], np.int32, size + 1, padded.offset * 4)
        if int(offsets[-1] - offsets[0]) == size * width:  # no name longer than width
            raw = np.frombuffer(padded.buffers()[2], np.uint8, size * width, int(offsets[0]))
            return raw.view("<u8").reshape(size, width // 8)
    matrix = np.zeros((size, width), np.uint8)
    names = pa.concat_arrays([names]) if names.offset else names
    offsets = np.frombuffer(names.buffers()[1], np.int32, size + 1).astype(np.int64)
    total = int(offsets[-1] - offsets[0])
    data = np.frombuffer(names.buffers()[2] or b"", np.uint8, total, int(offsets[0]))
    rows = np.repeat(np.arange(size, dtype=np.int64), lengths)
    places = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1] - offsets[0], lengths)
    matrix.reshape(-1)[rows * width + places] = data
    return matrix.view("<u8").reshape(size, width // 8)


def _fold_words(value: int, data: bytes) -> int:
    """``value`` folded with each 8-byte word of ``data`` (zero padded), in Python ints:
    what :func:`_folded` does a column at a time, for one long name."""
    for word in np.frombuffer(data + bytes(-len(data) % 8), "<u8").tolist():
        mixed = value ^ word
        mixed ^= mixed >> 33
        mixed = (mixed * _M1) & _U64
        mixed ^= mixed >> 33
        mixed = (mixed * _M2) & _U64
        value = mixed ^ (mixed >> 33)
    return value


def _folded(parents: np.ndarray, names: pa.Array) -> np.ndarray:
    """Each key's 64-bit hash, before it is split in two (see the module's docstring)."""
    lengths = pc.binary_length(names).to_numpy(zero_copy_only=False).astype(np.int64)
    words = (lengths + 7) // 8
    hashes = parents.astype(np.int64).view(np.uint64) ^ _mix(
        lengths.astype(np.uint64) * np.uint64(_GOLDEN)
    )
    for row in np.flatnonzero(words > _ONE_BY_ONE):  # a word at a time costs less here
        name = names[int(row)].as_py().encode()
        hashes[row] = _fold_words(int(hashes[row]), name)
    long_rows = np.flatnonzero((words > _WORD_COLUMNS) & (words <= _ONE_BY_ONE))  # in parts
    parts = [
        np.flatnonzero(words <= _WORD_COLUMNS),
        *np.array_split(long_rows, len(long_rows) // 4096 + 1),
    ]
    for part in parts:
        if not len(part):
            continue
        width = 8 * max(1, int(words[part].max()))
        matrix = _word_matrix(names.take(pa.array(part)), lengths[part], width)
        folded, counts = hashes[part], words[part]
        for column in range(matrix.shape[1]):
            folded = np.where(column < counts, _mix(folded ^ matrix[:, column]), folded)
        hashes[part] = folded
    return hashes


@functools.lru_cache(maxsize=1 << 16)
def fold_key(key: Key) -> int:
    """One key's 64-bit hash (:meth:`KeyHashes.folded`), in Python ints: the same value.
    Remembered for the latest keys: a visit one key at a time hashes its key and its
    parent's, and the same parents come again and again."""
    data = key[1].encode()
    value = (key[0] & _U64) ^ _mix_one((len(data) * _GOLDEN) & _U64)
    for start in range(0, len(data), 8):
        word = int.from_bytes(data[start : start + 8].ljust(8, b"\0"), "little")
        value = _mix_one(value ^ word)
    return value


def _parted(folded: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """:meth:`KeyHashes.indexed` from the folded hashes."""
    spread = parents.view(np.uint64) * np.uint64(_GOLDEN) + np.uint64(_SALT1)
    return folded ^ _mix(spread)


def index_key(key: Key) -> int:
    """One key's :meth:`KeyHashes.indexed` hash, in Python ints: the same value."""
    return fold_key(key) ^ _mix_one((key[0] * _GOLDEN + _SALT1) & _U64)


class KeyHashes:
    """Keys ``(parents[i], names[i])`` and their hashes, each kind computed once, on first
    use: the pair this module's filter probes, and the legacy XXH3 values."""

    def __init__(
        self,
        parents: np.ndarray,
        names: Sequence[str] | pa.Array,
        folded: np.ndarray | None = None,
        legacy: list[int] | None = None,
        indexed: np.ndarray | None = None,
    ) -> None:
        self.parents = np.asarray(parents, dtype=np.int64)
        self.names = names
        self._folded = folded
        self._pairs: dict[bool, tuple[np.ndarray, np.ndarray]] = {}
        self._legacy = legacy
        self._indexed = indexed

    def __len__(self) -> int:
        return len(self.parents)

    def arrow_names(self) -> pa.Array:
        """The names as one Arrow string array (converted once)."""
        names = self.names
        if isinstance(names, pa.ChunkedArray):
            names = names.combine_chunks()
        if not isinstance(names, pa.Array):
            names = pa.array(names, pa.string())
        elif names.type != pa.string():
            names = names.cast(pa.string())
        self.names = names
        return names

    def folded(self) -> np.ndarray:
        """Each key's 64-bit hash (uint64; see the module's docstring): the filter's pair
        comes from it, and the memtable's key index uses it as it is."""
        if self._folded is None:
            if len(self) >= native.NATIVE_FROM:
                self._folded = native.folded_hashes(self.parents, self.arrow_names())
            else:
                self._folded = _folded(self.parents, self.arrow_names())
        return self._folded

    def indexed(self) -> np.ndarray:
        """Each key's hash for the memtable's key index: the folded hash with the parent
        id mixed in once more. Folding XORs the parent id into the name's first word, so
        keys whose parent ids differ exactly as their names' first bytes do fold alike
        (common with small ids and names that count); mixed again, they part.

        >>> hashes = KeyHashes(np.array([1, 2]), ["0", "3"])  # "0" ^ "3" == 1 ^ 2
        >>> [len(set(h.tolist())) for h in (hashes.folded(), hashes.indexed())]
        [1, 2]
        """
        if self._indexed is None:
            if len(self) >= native.NATIVE_FROM:
                self._indexed = native.parted_hashes(self.folded(), self.parents)
            else:
                self._indexed = _parted(self.folded(), self.parents)
        return self._indexed

    def pair(self, parted: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Two 64-bit hashes per key (uint64 arrays), from :meth:`indexed` (``parted``: the
        filters written now) or from :meth:`folded` (the first kind's)."""
        pair = self._pairs.get(parted)
        if pair is None:
            base = self.indexed() if parted else self.folded()
            pair = self._pairs[parted] = (
                _mix(base ^ np.uint64(_SALT1)),
                _mix(base ^ np.uint64(_SALT2)) | np.uint64(1),
            )
        return pair

    def legacy(self) -> list[int]:
        """Each key's XXH3 hash as format-1 filters hold it (signed 128-bit)."""
        if self._legacy is None:
            names = self.names
            listed = names.to_pylist() if isinstance(names, pa.Array) else list(names)
            self._legacy = _legacy_hashes(self.parents.tolist(), listed)
        return self._legacy

    def take(self, rows: np.ndarray) -> KeyHashes:
        """The keys at ``rows``, with the hashes computed so far."""
        names = self.names
        if isinstance(names, pa.Array):
            names = names.take(pa.array(rows))
        else:
            names = [names[i] for i in rows.tolist()]
        folded = None if self._folded is None else self._folded[rows]
        legacy = None if self._legacy is None else [self._legacy[i] for i in rows.tolist()]
        indexed = None if self._indexed is None else self._indexed[rows]
        return KeyHashes(self.parents[rows], names, folded, legacy, indexed)


def _legacy_hashes(parents: list[int], names: Sequence[str]) -> list[int]:
    digest, shift = xxhash.xxh3_128_intdigest, 1 << 127
    return [digest(b"%d/%s" % (p, n.encode())) - shift for p, n in zip(parents, names, strict=True)]


class KeyFilter:
    """A Bloom filter of :class:`KeyHashes` pairs over ``size`` bits (``bits``: packed,
    little-endian bit order)."""

    def __init__(self, bits: np.ndarray, size: int, kind: str = FILTER_FORMAT) -> None:
        self.bits = bits
        self.size = size
        self.kind = kind
        self._parted = kind == FILTER_FORMAT

    @classmethod
    def sized(cls, expected: int) -> KeyFilter:
        """An empty filter for about ``expected`` keys."""
        size = min(_MAX_BITS, max(64, _BITS_PER_KEY * expected))
        return cls(np.zeros((size + 7) // 8, np.uint8), size)

    def _bases(self, hashes: KeyHashes) -> np.ndarray:
        """Each key's hash the probes start from (see :meth:`KeyHashes.pair`)."""
        return hashes.indexed() if self._parted else hashes.folded()

    def _probes(self, hashes: KeyHashes) -> tuple[np.ndarray, np.ndarray]:
        """Each key's first probe and its stride: probe ``i`` is ``low + i * stride`` in 32
        bits, scaled to the filter's size by :meth:`_scaled`."""
        first, step = hashes.pair(self._parted)
        return (first >> np.uint64(32)).astype(np.uint32), step.astype(np.uint32) | np.uint32(1)

    def _scaled(self, probes: np.ndarray) -> np.ndarray:
        return ((probes.astype(np.uint64) * np.uint64(self.size)) >> np.uint64(32)).astype(np.int64)

    def add(self, hashes: KeyHashes) -> None:
        """Add the keys: from :data:`~treestore.native.NATIVE_FROM` keys on in one compiled
        pass over the packed bits (:func:`~treestore.native.filter_add`), else in numpy."""
        if not self.bits.flags.writeable:
            self.bits = self.bits.copy()
        if len(hashes) >= native.NATIVE_FROM:
            native.filter_add(self.bits, self.size, self._bases(hashes), _PROBES)
            return
        low, stride = self._probes(hashes)
        for i in range(_PROBES):
            places = self._scaled(low + np.uint32(i) * stride)
            np.bitwise_or.at(self.bits, places >> 3, (1 << (places & 7)).astype(np.uint8))

    def may_hold(self, hashes: KeyHashes, among: np.ndarray | None = None) -> np.ndarray:
        """Whether each key may be in the filter (``False``: it is not); with ``among``,
        only the keys at those positions are probed (the others: ``False``). Each probe
        reads the bits of the keys still in, so absent keys cost about two probes."""
        if among is not None:
            held = np.zeros(len(hashes), dtype=bool)
            if len(among):
                held[among] = self._held(hashes, among)
            return held
        return self._held(hashes, None)

    def _held(self, hashes: KeyHashes, among: np.ndarray | None) -> np.ndarray:
        """:meth:`may_hold` of the keys ``among`` (all when None), one value each."""
        count = len(hashes) if among is None else len(among)
        if count >= native.NATIVE_FROM:
            bases = self._bases(hashes)
            bases = bases if among is None else bases[among]
            return native.filter_holds(self.bits, self.size, bases, _PROBES)
        low, stride = self._probes(hashes)
        if among is not None:
            low, stride = low[among], stride[among]
        alive = np.arange(count)
        for i in range(_PROBES):
            places = self._scaled(low[alive] + np.uint32(i) * stride[alive])
            alive = alive[(self.bits[places >> 3] >> (places & 7).astype(np.uint8)) & 1 == 1]
        held = np.zeros(count, dtype=bool)
        held[alive] = True
        return held

    def holds(self, key: Key) -> bool:
        """Whether ``key`` may be in the filter (one key, in Python ints)."""
        base = index_key(key) if self._parted else fold_key(key)
        low = _mix_one(base ^ _SALT1) >> 32
        stride = (_mix_one(base ^ _SALT2) | 1) & 0xFFFFFFFF
        for i in range(_PROBES):
            place = (((low + i * stride) & 0xFFFFFFFF) * self.size) >> 32
            if not (int(self.bits[place >> 3]) >> (place & 7)) & 1:
                return False
        return True

    def save(self) -> dict[str, Any]:
        """What a run index records of the filter."""
        return {"kind": self.kind, "bits": self.size, "filter": self.bits.tobytes()}

    @classmethod
    def load(cls, saved: dict[str, Any]) -> KeyFilter:
        """The filter :meth:`save` recorded (``ValueError`` if it is not one)."""
        kind = saved.get("kind")
        if kind not in _KINDS:
            raise ValueError(f"an unknown key filter {kind!r}")
        size = int(saved["bits"])
        bits = np.frombuffer(saved["filter"], np.uint8)
        if len(bits) != (size + 7) // 8:
            raise ValueError("a key filter of the wrong size")
        return cls(bits, size, kind)


def _identity(value: int) -> int:
    return value


class LegacyFilter:
    """The filter of a run of index format 1: ``rbloom`` over per-key XXH3 hashes."""

    def __init__(self, saved: bytes) -> None:
        self.bloom = Bloom.load_bytes(saved, _identity)

    def may_hold(self, hashes: KeyHashes, among: np.ndarray | None = None) -> np.ndarray:
        """Whether each key may be in the filter (with ``among``, only the keys at those
        positions are probed; the others: ``False``)."""
        values = hashes.legacy()
        if among is None:
            return np.fromiter(map(self.bloom.__contains__, values), dtype=bool, count=len(values))
        held = np.zeros(len(values), dtype=bool)
        held[among] = [values[i] in self.bloom for i in among.tolist()]
        return held

    def holds(self, key: Key) -> bool:
        """Whether ``key`` may be in the filter."""
        return _legacy_hashes([key[0]], [key[1]])[0] in self.bloom


def load_filter(index: dict[str, Any]) -> KeyFilter | LegacyFilter:
    """The key filter a run index (decoded) holds, of either format."""
    if "bloom" in index:
        return LegacyFilter(index["bloom"])
    return KeyFilter.load(index["filter"])
