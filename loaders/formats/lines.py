"""The lines of a text input: blank ones, ones that are not UTF-8, the first one, and a
stream that leaves out the lines set aside.

Line numbers are physical and 1-based. A line that is not UTF-8 text is a bad record:
the readers set it aside with its number and go on with the others. Checking is
vectorized (one check per block of bytes, at memory speed); only a block that holds a
bad line is looked at line by line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from loaders.formats.quotes import open_quote_lines
from loaders.formats.read_spec import UnreadableInput
from treestore.filesystems import input_stream

__all__ = [
    "BLOCK_BYTES",
    "MAX_LINE_BYTES",
    "SHOWN_BYTES",
    "FirstLine",
    "LineChunks",
    "LineScan",
    "StreamWithoutLines",
    "first_bad_byte",
    "first_line",
    "is_utf8",
    "not_utf8_reason",
    "physical",
    "scan_lines",
    "too_long_reason",
    "undecodable_lines",
]

BLOCK_BYTES = 8 << 20
MAX_LINE_BYTES = 256 << 20
"""The longest line a record may be: a longer one is set aside with its first
:data:`SHOWN_BYTES` bytes (never held whole); a shorter one is read whole, however long."""
SHOWN_BYTES = 1024
_ESCAPED = re.compile("[\udc80-\udcff]")
"""An undecodable byte, as ``surrogateescape`` decoding writes it."""


def is_utf8(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8 (ASCII checked first; then Arrow's SIMD check)."""
    if data.isascii():
        return True
    offsets = np.array([0, len(data)], dtype=np.int64)
    text = pa.LargeStringArray.from_buffers(1, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data))
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def first_bad_byte(text: str) -> int | None:
    """Where the first byte that is not UTF-8 is (1-based, in bytes) in ``text`` decoded
    with ``surrogateescape``; None when every byte decoded."""
    match = _ESCAPED.search(text)
    if match is None:
        return None
    return len(text[: match.start()].encode("utf-8", "surrogateescape")) + 1


def undecodable_lines(data: bytes) -> list[tuple[int, int]]:
    """The lines of ``data`` that are not UTF-8 text: (0-based line index in ``data``,
    1-based byte in that line of the first bad byte)."""
    text = data.decode("utf-8", "surrogateescape")
    found: list[tuple[int, int]] = []
    index, counted_to = 0, 0
    match = _ESCAPED.search(text)
    while match is not None:
        at = match.start()
        index += text.count("\n", counted_to, at)
        start = text.rfind("\n", 0, at) + 1
        found.append((index, len(text[start:at].encode("utf-8", "surrogateescape")) + 1))
        end = text.find("\n", at)
        if end < 0:
            break
        index, counted_to = index + 1, end + 1
        match = _ESCAPED.search(text, end + 1)
    return found


def not_utf8_reason(byte: int) -> str:
    """Why a line that is not UTF-8 text is set aside (``byte``: its first bad byte, 1-based)."""
    return f"not UTF-8 text (byte {byte})"


@dataclass(frozen=True)
class LineScan:
    """What one pass over a text file found (sorted physical line numbers): its blank lines,
    its lines that are not UTF-8 text, its csv lines that end inside a quoted value (each
    read on its own) and its lines longer than :data:`MAX_LINE_BYTES`; and its longest
    line that a read ended inside (bytes)."""

    blanks: np.ndarray
    undecodable: np.ndarray
    open_quotes: np.ndarray
    too_long: np.ndarray
    longest: int


def _blank_lines_of(chunk: bytes, line: int) -> list[int]:
    """The blank lines of ``chunk`` (whole lines, the first numbered ``line``), found with
    memchr-speed scans."""
    found = [0] if chunk.startswith((b"\n", b"\r\n")) else []
    for pattern in (b"\n\n", b"\n\r\n"):
        at = chunk.find(pattern)
        while at >= 0:
            found.append(at + 1)
            at = chunk.find(pattern, at + 1)
    blanks, counted, seen = [], 0, 0
    for at in sorted(found):
        counted += chunk.count(b"\n", seen, at)
        seen = at
        blanks.append(line + counted)
    return blanks


def too_long_reason(kept: bool = True) -> str:
    """Why a line longer than :data:`MAX_LINE_BYTES` is set aside (``kept``: its first
    :data:`SHOWN_BYTES` bytes are kept as its text) or refused."""
    said = f"longer than {MAX_LINE_BYTES:,} bytes, the most one line may hold"
    return f"{said} (its first {SHOWN_BYTES:,} bytes kept as its text)" if kept else said


class LineChunks:
    """The chunks of whole lines of a text ``stream`` (read ``read_bytes`` at a time): each
    ``(number of its first line, bytes)``, the last one without a newline when the file
    ends without one. A line longer than :data:`MAX_LINE_BYTES` is never held whole: its
    first :data:`SHOWN_BYTES` bytes stand for it in its chunk, and :attr:`too_long` keeps
    its number and length. :attr:`longest` is the longest line kept that a read ended
    inside (any other fits in one read)."""

    def __init__(self, stream: Any, read_bytes: int = BLOCK_BYTES) -> None:
        self.stream, self.read_bytes = stream, read_bytes
        self.too_long: dict[int, int] = {}
        self.longest = 0

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        limit = MAX_LINE_BYTES
        size = min(self.read_bytes, limit)  # so a line past the limit goes on past a read
        line, parts, held, dropping = 1, [b""], 0, 0
        while True:
            block = self.stream.read(size)
            done = not block
            if dropping:  # the rest of a line too long to hold, dropped up to its end
                end = block.find(b"\n")
                if end < 0 and not done:
                    dropping += len(block)
                    continue
                self.too_long[line] = dropping + max(end, 0) if not done else dropping
                block, dropping = (block[end:] if end >= 0 else b""), 0
            cut = len(block) if done else block.rfind(b"\n") + 1
            if not cut and not done:  # a line goes on past this read: held, up to the limit
                parts.append(block)
                held += len(block)
                if held > limit:
                    kept = b"".join(parts)
                    parts, held, dropping = [kept[:SHOWN_BYTES]], 0, len(kept)
                    self.too_long[line] = len(kept)
                continue
            if held:  # the first line began in an earlier read
                self.longest = max(self.longest, held + block.find(b"\n") + 1)
            chunk = b"".join([*parts, block[:cut]])
            parts = [block[cut:]]
            held = len(parts[0])
            if chunk:
                yield line, chunk
                line += chunk.count(b"\n")
            if done:
                return


def scan_lines(path: str, quoted: bool = False) -> LineScan:
    """One pass over the text file at ``path``: its blank lines, undecodable lines, lines
    too long to hold and, when ``quoted`` (csv), lines that end inside a quoted value."""
    blanks: list[int] = []
    undecodable: list[int] = []
    open_quotes: list[np.ndarray] = []
    with input_stream(path) as stream:
        chunks = LineChunks(stream)
        for line, chunk in chunks:
            blanks += _blank_lines_of(chunk, line)
            if not is_utf8(chunk):
                undecodable += [line + index for index, _ in undecodable_lines(chunk)]
            if quoted:
                open_quotes.append(open_quote_lines(chunk) + line)
    too_long = np.array(sorted(chunks.too_long), dtype=np.int64)
    opened = np.concatenate(open_quotes) if open_quotes else np.zeros(0, dtype=np.int64)
    return LineScan(
        np.array(blanks, dtype=np.int64),
        np.array(undecodable, dtype=np.int64),
        np.setdiff1d(opened, too_long),
        too_long,
        chunks.longest,
    )


@dataclass(frozen=True)
class FirstLine:
    """A file's first line that is not blank: its bytes (with its newline), number and
    the byte it starts at."""

    data: bytes
    number: int
    offset: int


def first_line(path: str, skip: Iterable[int] = ()) -> FirstLine | None:
    """The first line of a text file that is neither blank nor in ``skip`` (None: none); a
    line longer than :data:`MAX_LINE_BYTES` that is not skipped raises
    :class:`~loaders.formats.read_spec.UnreadableInput`."""
    skipped = set(skip)
    offset = 0
    with input_stream(path) as stream:
        chunks = LineChunks(stream, 1 << 16)
        for first, chunk in chunks:
            parts = chunk.split(b"\n")
            if chunk.endswith(b"\n"):
                parts.pop()
            for number, part in enumerate(parts, first):
                length = chunks.too_long.get(number)
                if part.strip(b"\r") and number not in skipped:
                    if length is not None:
                        raise UnreadableInput(
                            f"line {number}, at byte offset {offset}, is {too_long_reason(False)}"
                        )
                    return FirstLine(part + b"\n", number, offset)
                offset += (len(part) if length is None else length) + 1
    return None


def physical(numbers: np.ndarray, skipped: np.ndarray) -> np.ndarray:
    """Line numbers that leave out the ``skipped`` lines (sorted physical numbers: blank
    lines, lines set aside) -> physical line numbers."""
    if not len(skipped):
        return numbers
    shifted = skipped - np.arange(len(skipped))
    return numbers + np.searchsorted(shifted, numbers, side="right")


class StreamWithoutLines:
    """A readable file over ``stream`` in which the lines numbered ``lines`` (sorted) are
    empty, so a CSV parser that ignores empty lines never sees them; the lines left out
    are kept in :attr:`found` as (number, bytes) until :meth:`take` hands them over (a line
    too long to hold: its first bytes). Only a block that holds one of them is split into
    lines."""

    closed = False

    def __init__(self, stream: Any, lines: np.ndarray) -> None:
        self.lines = lines
        self.found: list[tuple[int, bytes]] = []
        self._chunks = iter(LineChunks(stream))
        self._ready, self._done = memoryview(b""), False

    def readable(self) -> bool:
        """A stream for reading."""
        return True

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left when negative); b"" at the end."""
        if size < 0:
            parts = [bytes(self._ready)]
            while not self._done:
                self._fill()
                parts.append(bytes(self._ready))
            self._ready = memoryview(b"")
            return b"".join(parts)
        while not len(self._ready) and not self._done:
            self._fill()
        taken, self._ready = self._ready[:size], self._ready[size:]
        return bytes(taken)

    def close(self) -> None:
        """Nothing to release: the caller closes the stream it gave."""
        self.closed = True

    def take(self) -> list[tuple[int, bytes]]:
        """The lines left out since the last call: (number, the line without its newline)."""
        found, self.found = self.found, []
        return found

    def _fill(self) -> None:
        line, chunk = next(self._chunks, (0, b""))
        self._done = not chunk
        ends = chunk.count(b"\n")
        last = line + ends + (0 if chunk.endswith(b"\n") or not chunk else 1)
        low, high = np.searchsorted(self.lines, [line, last])
        if low < high:
            numbers = set(self.lines[low:high].tolist())
            parts = chunk.split(b"\n")
            for index, part in enumerate(parts):
                if line + index in numbers:
                    self.found.append((line + index, part))
                    parts[index] = b""
            chunk = b"\n".join(parts)
        self._ready = memoryview(chunk)
