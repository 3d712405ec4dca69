"""The lines of a text input: blank ones, ones that are not UTF-8, the first one, and a
stream that leaves out the lines set aside.

Line numbers are physical and 1-based. A line that is not UTF-8 text is a bad record:
the readers set it aside with its number and go on with the others. Checking is
vectorized (one check per block of bytes, at memory speed); only a block that holds a
bad line is looked at line by line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from treestore.filesystems import input_stream

__all__ = [
    "BLOCK_BYTES",
    "FirstLine",
    "LineScan",
    "StreamWithoutLines",
    "first_bad_byte",
    "first_line",
    "is_utf8",
    "not_utf8_reason",
    "physical",
    "scan_lines",
    "undecodable_lines",
]

BLOCK_BYTES = 8 << 20
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
    """What one pass over a text file found: its blank lines and its lines that are not
    UTF-8 text (sorted physical numbers)."""

    blanks: np.ndarray
    undecodable: np.ndarray


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


def scan_lines(path: str) -> LineScan:
    """One pass over the text file at ``path``: its blank lines and undecodable lines."""
    blanks: list[int] = []
    undecodable: list[int] = []
    line, carry = 1, b""
    with input_stream(path) as stream:
        while True:
            block = stream.read(BLOCK_BYTES)
            data = carry + block
            cut = data.rfind(b"\n") + 1 if block else len(data)
            chunk, carry = data[:cut], data[cut:]
            blanks += _blank_lines_of(chunk, line)
            if not is_utf8(chunk):
                undecodable += [line + index for index, _ in undecodable_lines(chunk)]
            line += chunk.count(b"\n")
            if not block:
                return LineScan(
                    np.array(blanks, dtype=np.int64), np.array(undecodable, dtype=np.int64)
                )


@dataclass(frozen=True)
class FirstLine:
    """A file's first line that is not blank: its bytes (with its newline), number and
    the byte it starts at."""

    data: bytes
    number: int
    offset: int


def first_line(path: str, skip: Iterable[int] = ()) -> FirstLine | None:
    """The first line of a text file that is neither blank nor in ``skip`` (None: none)."""
    skipped = set(skip)
    found, number, offset = b"", 1, 0
    with input_stream(path) as stream:
        while True:
            block = stream.read(1 << 16)
            found += block
            parts = found.split(b"\n")
            whole = parts if not block else parts[:-1]
            for part in whole:
                if part.strip(b"\r") and number not in skipped:
                    return FirstLine(part + b"\n", number, offset)
                number, offset = number + 1, offset + len(part) + 1
            if not block:
                return None
            found = parts[-1]


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
    are kept in :attr:`found` as (number, bytes) until :meth:`take` hands them over.
    Only a block that holds one of them is split into lines."""

    closed = False

    def __init__(self, stream: Any, lines: np.ndarray) -> None:
        self.stream, self.lines = stream, lines
        self.found: list[tuple[int, bytes]] = []
        self._line, self._carry, self._ready, self._done = 1, b"", memoryview(b""), False

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
        block = self.stream.read(BLOCK_BYTES)
        data = self._carry + block
        cut = data.rfind(b"\n") + 1 if block else len(data)
        chunk, self._carry = data[:cut], data[cut:]
        self._done = not block
        ends = chunk.count(b"\n")
        last = self._line + ends + (0 if chunk.endswith(b"\n") or not chunk else 1)
        low, high = np.searchsorted(self.lines, [self._line, last])
        if low < high:
            numbers = set(self.lines[low:high].tolist())
            parts = chunk.split(b"\n")
            for index, part in enumerate(parts):
                if self._line + index in numbers:
                    self.found.append((self._line + index, part))
                    parts[index] = b""
            chunk = b"\n".join(parts)
        self._line += ends
        self._ready = memoryview(chunk)
