"""Which listed input files a store has loaded already: an input file's identity.

A version's manifest keeps, under ``inputs``, what each load recorded of the files it
read, keyed by the file's source (its name, URL-quoted) and its path relative to the
source's root (``attributes/2024/a.tsv``, see :func:`input_key`)::

    {"source": ..., "root": ..., "relative": ..., "size": ..., "mtime_ns": ...,
     "fingerprint": ..., "records": ..., "version": ...}

Stores written before kept the file's absolute path as the key, without ``root``,
``relative`` and ``fingerprint``: those entries are still found by absolute path, and
keep their form (they are not rewritten).

A listed file is found by its key, else by its absolute location (which finds the old
entries, and the files of a renamed source); then, against what was recorded:

- same size and modification time: the same file, nothing is read;
- same size, another modification time (a copy made without keeping times, such as
  ``cp`` without ``-p``): the content fingerprints decide, computed on the driver for
  these files only; equal: the same file (the next version records its new time),
  different: changed;
- another size, or no fingerprint recorded: changed. A changed file is skipped with a
  warning, or read again with ``--reprocess-changed``.

So a listing reads no file unless its modification time moved. The price, as for make
and rsync: a file rewritten with the same size and modification time (``touch -r``, a
clock set back) is not noticed; neither is a same-size edit that keeps the first and last
:data:`FINGERPRINT_BLOCK` bytes of a larger file when its modification time moved too.

When files are found by their relative path under another root than the one they were
loaded from (the store and its inputs moved, were copied, or are mounted elsewhere), the
load warns, once per source, naming both roots (a job pointed at another copy of its
inputs by mistake shows there); the next version records the new root.

The fingerprint is xxh3-128 of the size, the first and the last :data:`FINGERPRINT_BLOCK`
bytes (the whole file when it is at most twice that), computed at load time by the task
that reads the file.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import xxhash

from loaders.job.model import SourceSpec
from loaders.listing.files import InputFile
from treestore.filesystems import input_file

__all__ = [
    "FINGERPRINT_BLOCK",
    "InputScan",
    "fingerprint",
    "input_key",
    "loaded_entry",
    "location_of",
    "scan_inputs",
]

FINGERPRINT_BLOCK = 64 << 10
"""Bytes a fingerprint takes from each end of a file."""
_FINGERPRINT_THREADS = 8


def fingerprint(location: str, size: int) -> str | None:
    """The content fingerprint of the first ``size`` bytes of the file at ``location``
    (see the module's notes), or None when it cannot be read."""
    digest = xxhash.xxh3_128(size.to_bytes(8, "little"))
    try:
        with input_file(location) as opened:
            if size <= 2 * FINGERPRINT_BLOCK:
                digest.update(opened.read_at(size, 0))
            else:
                digest.update(opened.read_at(FINGERPRINT_BLOCK, 0))
                digest.update(opened.read_at(FINGERPRINT_BLOCK, size - FINGERPRINT_BLOCK))
    except (OSError, ValueError):
        return None
    return f"xxh3-128:{digest.hexdigest()}"


@functools.lru_cache(maxsize=1 << 16)
def _fingerprint_of(location: str, size: int, mtime_ns: int) -> str | None:
    """:func:`fingerprint`, once per file state in a process (a precheck, then its load)."""
    del mtime_ns  # part of the key only
    return fingerprint(location, size)


def input_key(source: str, relative: str) -> str:
    """The manifest's key of the file at ``relative`` under the root of source ``source``."""
    return f"{quote(source, safe='')}/{relative}"


def location_of(key: str, entry: Mapping[str, Any]) -> str:
    """Where the file of a manifest entry was when it was last recorded (old entries:
    their key, an absolute path)."""
    if "relative" not in entry:
        return key
    return f"{str(entry['root']).rstrip('/')}/{entry['relative']}"


def loaded_entry(
    source: str, loaded: InputFile, records: int, version: int, fingerprint: str | None
) -> dict[str, Any]:
    """What the manifest records of ``loaded``, read by ``version`` from ``source``."""
    entry: dict[str, Any] = {
        "source": source,
        "size": loaded.size,
        "mtime_ns": loaded.mtime_ns,
        "records": records,
        "version": version,
    }
    if loaded.relative:
        entry.update(root=loaded.root, relative=loaded.relative)
    if fingerprint is not None:
        entry["fingerprint"] = fingerprint
    return entry


@dataclass
class InputScan:
    """Which listed files a load reads, and what it found of the others.

    Attributes:
        fresh: source index -> the files to read (new, or changed with
            ``--reprocess-changed``).
        changed: source name -> the changed files' paths.
        keys: (source index, path) -> the manifest key a fresh file is recorded under.
        refreshed: manifest key -> its entry with the file's new root and modification
            time (the same file, found moved or with a new time), for the next version.
    """

    fresh: dict[int, list[InputFile]] = field(default_factory=dict)
    changed: dict[str, list[str]] = field(default_factory=dict)
    keys: dict[tuple[int, str], str] = field(default_factory=dict)
    refreshed: dict[str, dict[str, Any]] = field(default_factory=dict)


class _Loaded:
    """A manifest's inputs, found by key or by absolute location."""

    def __init__(self, inputs: Mapping[str, Mapping[str, Any]]) -> None:
        self.inputs = inputs
        self._by_location: dict[str, str] | None = None

    def find(self, source: str, listed: InputFile) -> tuple[str, Mapping[str, Any]] | None:
        """The key and entry of ``listed``, a file of ``source`` (None: not loaded yet)."""
        if listed.relative:
            key = input_key(source, listed.relative)
            if key in self.inputs:
                return key, self.inputs[key]
        if self._by_location is None:
            self._by_location = {location_of(k, e): k for k, e in self.inputs.items()}
        places = [listed.path]  # where it is read; and as listed, for a link to a file
        if listed.relative:
            places.append(location_of("", {"root": listed.root, "relative": listed.relative}))
        for where in places:
            key = self._by_location.get(where, "")
            if key:
                return key, self.inputs[key]
        return None


def _same_content(pairs: list[tuple[InputFile, Mapping[str, Any]]]) -> list[bool]:
    """Whether each listed file's fingerprint is the one recorded (read in threads)."""

    def check(pair: tuple[InputFile, Mapping[str, Any]]) -> bool:
        listed, entry = pair
        return _fingerprint_of(listed.path, listed.size, listed.mtime_ns) == entry["fingerprint"]

    if len(pairs) < 2:
        return [check(pair) for pair in pairs]
    with ThreadPoolExecutor(min(_FINGERPRINT_THREADS, len(pairs))) as pool:
        return list(pool.map(check, pairs))


def _say_changed(log: Callable[[str], None], path: str, version: Any, again: bool) -> None:
    if again:
        log(
            f"{path} changed after it was loaded (version {version}); it is read again "
            "(--reprocess-changed)"
        )
    else:
        log(
            f"warning: {path} changed after it was loaded (version {version}); it is "
            "skipped, not loaded twice. Use --reprocess-changed to read it again."
        )


def _verdict(listed: InputFile, entry: Mapping[str, Any]) -> bool | None:
    """Whether ``listed`` is the file ``entry`` recorded: True, False (changed), or None
    when only the content fingerprints can tell."""
    if int(entry["size"]) != listed.size:
        return False
    if int(entry["mtime_ns"]) == listed.mtime_ns:
        return True
    return None if entry.get("fingerprint") else False


def scan_inputs(
    sources: Sequence[SourceSpec],
    listed: Sequence[list[InputFile]],
    inputs: Mapping[str, Mapping[str, Any]],
    log: Callable[[str], None],
    reprocess_changed: bool,
) -> InputScan:
    """Which of each source's ``listed`` files are new to a store whose manifest records
    ``inputs`` (or changed); says what it finds through ``log`` (see the module's notes)."""
    loaded = _Loaded(inputs)
    scan = InputScan()
    for index, (source, files) in enumerate(zip(sources, listed, strict=True)):
        fresh: list[InputFile] = []
        known: list[tuple[InputFile, str, Mapping[str, Any], bool | None]] = []
        if not files:  # a typo in a path or glob would otherwise load as an empty source
            log(
                f"warning: source {source.name}: its path {source.path} matches no file; "
                "nothing is read from it"
            )
        for listed_file in files:
            found = loaded.find(source.name, listed_file)
            if found is None:
                key = listed_file.path
                if listed_file.relative:
                    key = input_key(source.name, listed_file.relative)
                scan.keys[(index, listed_file.path)] = key
                fresh.append(listed_file)
            else:
                key, entry = found
                scan.keys[(index, listed_file.path)] = key
                known.append((listed_file, key, entry, _verdict(listed_file, entry)))
        unsure = [(f, e) for f, _, e, same in known if same is None]
        told = iter(_same_content(unsure))
        moved: Counter[str] = Counter()
        changed: set[str] = set()
        for listed_file, key, entry, verdict in known:
            same = next(told) if verdict is None else verdict
            new_form = "relative" in entry and bool(listed_file.relative)
            if new_form and entry["root"] != listed_file.root:
                moved[str(entry["root"])] += 1
            if not same:
                changed.add(listed_file.path)
                scan.changed.setdefault(source.name, []).append(listed_file.path)
                _say_changed(log, listed_file.path, entry.get("version"), reprocess_changed)
            elif new_form and (entry["root"], entry["mtime_ns"]) != (
                listed_file.root,
                listed_file.mtime_ns,
            ):  # the same file, moved or with a new time: the next version records it (an
                # entry of the old form keeps its form: found by absolute path, it never moved)
                scan.refreshed[key] = {
                    **entry,
                    "root": listed_file.root,
                    "mtime_ns": listed_file.mtime_ns,
                }
        for old, count in sorted(moved.items()):
            log(
                f"warning: source {source.name}: its files were loaded from {old} and are "
                f"now under {files[0].root}: they are matched by their path relative to it "
                f"({count} file(s) already loaded)"
            )
        if reprocess_changed and changed:  # read again, in the listing's order
            new = set(fresh)
            fresh = [f for f in files if f.path in changed or f in new]
        log(f"source {source.name}: {len(fresh)} new file(s)")
        if fresh:
            scan.fresh[index] = fresh
    return scan
