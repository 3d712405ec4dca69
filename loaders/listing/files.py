"""Listing a source's input files, each with its source's root and its path under it.

A source's ``path`` is a local file, folder or glob, or the same as a URI
(``s3://bucket/in/``, ``s3://bucket/in/*.tsv``, ``hdfs://nn:8020/in``), listed on the
driver (URIs through pyarrow filesystems, :mod:`treestore.filesystems`).

A source's **root** is where its files' relative paths start: a folder source's folder,
a glob's folder before its first glob character, a single file's folder (the same for
URIs). Every listed :class:`InputFile` carries its root and its path relative to it,
which is what identifies it in a store (:mod:`loaders.listing.identity`): the root may
move, the relative paths stay.

A folder lists its visible files (no part of their path under the folder starts with
``.`` or ``_``) and does not follow links to folders; a glob follows ``glob``'s rules
(``**``: any depth; ``*`` does not match a hidden name) and follows links to folders,
except a link to a folder that holds it (a loop): that one is reported and not followed.

Symbolic links: a link to a file is listed (read through the link; its relative path is
the link's own). A link that leads to nothing (its target is missing, or links lead back
to one another) is reported as a warning naming the link and its target, and skipped; a
source whose path is such a link, or whose only files are, is refused like a missing file.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

from loaders.job.model import SourceSpec
from treestore.errors import LoadError
from treestore.events import EventSink, Message, ignore_events
from treestore.filesystems import is_uri, split_location

__all__ = [
    "InputFile",
    "broken_link",
    "list_input_files",
    "located",
    "missing_source",
    "split_glob",
]

_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class InputFile:
    """One input file as found on disk.

    Attributes:
        path: where it is read: a local path (links resolved) or a URI.
        size: its size in bytes.
        mtime_ns: its modification time.
        relative: its path relative to its source's root (``2024/a.tsv``; ``""``: unknown).
        root: its source's root (a local folder, links resolved, or a URI).
    """

    path: str
    size: int
    mtime_ns: int
    relative: str = ""
    root: str = ""

    @classmethod
    def at(cls, path: Path, relative: str = "", root: str = "") -> InputFile:
        """Describe the file at ``path`` (``relative`` to its source's ``root``)."""
        stat = path.stat()
        return cls(str(path.resolve()), stat.st_size, stat.st_mtime_ns, relative, root)


def _visible(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).parts
    return not any(part.startswith((".", "_")) for part in parts)


def split_glob(path: str) -> tuple[str, list[str] | None]:
    """``path`` as the folder before its first glob character and the glob's segments
    after it (``"/in/*/a?.tsv"`` -> ``("/in", ["*", "a?.tsv"])``); no glob: ``(path, None)``."""
    first_glob = next((i for i, c in enumerate(path) if c in _GLOB_CHARS), None)
    if first_glob is None:
        return path, None
    cut = path.rfind("/", 0, first_glob)
    return path[:cut], path[cut + 1 :].split("/")


def _matches(parts: list[str], pattern: list[str]) -> bool:
    """Whether path segments ``parts`` match glob segments ``pattern`` (``**``: any depth)."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return (
        bool(parts)
        and fnmatch.fnmatchcase(parts[0], pattern[0])
        and not (parts[0].startswith(".") and not pattern[0].startswith("."))
        and _matches(parts[1:], pattern[1:])
    )


def _target(link: Path) -> str:
    """Where ``link`` points, as written (and as an absolute path when written relative)."""
    target = os.readlink(link)
    if os.path.isabs(target):
        return target
    return f"{target} ({os.path.normpath(os.path.join(link.parent, target))})"


def broken_link(path: Path) -> str | None:
    """Why ``path``, a symbolic link, leads to no file or folder (``"... is a symbolic link
    to X, which does not exist"``); None when it is no link or leads somewhere."""
    try:
        if not path.is_symlink():
            return None
        shown = _target(path)
    except OSError:
        return None
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{path} is a symbolic link to {shown}, which ends in a loop of links"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return f"{path} is a symbolic link to {shown}, which does not exist"
        return f"{path} is a symbolic link to {shown}, which cannot be reached ({exc.strerror})"
    return None


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:  # links that loop: as Path.is_file says
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


class _Links:
    """The broken links a listing meets: each reported once, as a warning."""

    def __init__(self, source: SourceSpec, on_event: EventSink) -> None:
        self.source = source
        self.on_event = on_event
        self.broken: dict[str, str] = {}

    def is_file(self, path: Path, entry: os.DirEntry[str] | None = None) -> bool:
        """Whether ``path`` (found as ``entry``) is a file, through links; a broken link is
        reported."""
        if _is_file(entry) if entry is not None else path.is_file():
            return True
        why = broken_link(path) if entry is None or entry.is_symlink() else None
        if why is not None and str(path) not in self.broken:
            self.broken[str(path)] = why
            self.on_event(Message(f"warning: source {self.source.name!r}: {why}: skipped"))
        return False

    def folder(self, entry: os.DirEntry[str], real: str, ancestors: frozenset[str]) -> str | None:
        """The real path of ``entry``, found in the folder whose real path is ``real``, if a
        glob may go into it (None: no folder, or a link to a folder that holds it, which is
        reported)."""
        if not _is_dir(entry):
            return None
        if not entry.is_symlink():
            return os.path.join(real, entry.name)
        inner = os.path.realpath(entry.path)
        if inner in ancestors:
            if entry.path not in self.broken:
                self.broken[entry.path] = "loop"
                self.on_event(
                    Message(
                        f"warning: source {self.source.name!r}: {entry.path} is a symbolic link "
                        f"to {_target(Path(entry.path))}, a folder that holds it: not followed "
                        "(a loop)"
                    )
                )
            return None
        return inner

    def refuse_if_only_links(self, files: list[InputFile]) -> None:
        """Refuse a source whose only files are broken links."""
        links = [why for why in self.broken.values() if why != "loop"]
        if files or not links:
            return
        more = f" (and {len(links) - 1} more such link(s))" if len(links) > 1 else ""
        raise LoadError(
            f"Source {self.source.name!r}: {links[0]}{more}, and it has no other file. "
            "Fix the link, or give a file, a folder or a glob in the job's 'path'."
        )


def _entries(directory: Path, hidden: bool) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as found:
            return [e for e in found if hidden or not e.name.startswith(".")]
    except OSError:
        return []


def _glob_local(folder: Path, pattern: list[str], links: _Links) -> list[Path]:
    """The local paths matching ``pattern`` under ``folder`` (see the module's notes)."""
    found: set[Path] = set()

    def visit(directory: Path, rest: tuple[str, ...], real: str, ancestors: frozenset[str]) -> None:
        head, tail = rest[0], rest[1:]
        if head == "**":
            if tail:
                visit(directory, tail, real, ancestors)  # ** as no folder at all
            for entry in _entries(directory, hidden=False):
                path = directory / entry.name
                if not tail and links.is_file(path, entry):
                    found.add(path)
                inner = links.folder(entry, real, ancestors)
                if inner is not None:
                    visit(path, rest, inner, ancestors | {inner})
            return
        for entry in _entries(directory, hidden=head.startswith(".")):
            if not fnmatch.fnmatchcase(entry.name, head):
                continue
            path = directory / entry.name
            if tail:
                inner = links.folder(entry, real, ancestors)
                if inner is not None:
                    visit(path, tail, inner, ancestors | {inner})
            elif links.is_file(path, entry):
                found.add(path)

    if folder.is_dir():
        real = os.path.realpath(folder)
        visit(folder, tuple(pattern), real, frozenset({real}))
    return sorted(found)


def _list_remote(source: SourceSpec) -> list[InputFile]:
    """The files of a source whose path is a URI, listed through its pyarrow filesystem."""
    from pyarrow import fs as pafs

    folder, pattern = split_glob(source.path)  # list the folder, match the glob's rest
    filesystem, root, prefix = split_location(folder, LoadError)
    try:
        found = filesystem.get_file_info(root)
        if found.type == pafs.FileType.File and pattern is None:
            infos = [found]
        elif found.type == pafs.FileType.Directory:
            listed = filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
            infos = [info for info in listed if info.type == pafs.FileType.File]
        else:
            infos = []
    except OSError as exc:
        from treestore.filesystems import describe_error

        raise LoadError(
            f"Source {source.name!r}: cannot list {source.path}: {describe_error(exc)}"
        ) from None
    if pattern is not None:
        infos = [i for i in infos if _matches(i.path[len(root) :].strip("/").split("/"), pattern)]
    elif found.type == pafs.FileType.Directory:
        infos = [i for i in infos if _visible(Path(i.path), Path(root))]
    elif not infos:
        raise LoadError(missing_source(source))
    base = root.rstrip("/")
    if found.type == pafs.FileType.File and pattern is None:
        base = posixpath.dirname(base)
    return sorted(
        (
            InputFile(
                prefix + i.path,
                i.size or 0,
                i.mtime_ns or 0,
                i.path[len(base) :].strip("/"),
                prefix + base,
            )
            for i in infos
        ),
        key=lambda f: f.path,
    )


def missing_source(source: SourceSpec) -> str:
    """What to say of a source whose path is no file, folder or glob (a broken link named)."""
    why = None if is_uri(source.path) else broken_link(Path(source.path))
    if why is not None:
        return (
            f"Source {source.name!r}: {why}. "
            "Fix the link, or give a file, a folder or a glob in the job's 'path'."
        )
    return (
        f"Source {source.name!r}: {source.path} does not exist. "
        "Give a file, a folder or a glob in the job's 'path'."
    )


def _local_root(source: SourceSpec) -> tuple[Path, list[str] | None]:
    """A local source's root as given (not resolved) and its glob's segments."""
    folder, pattern = split_glob(source.path)
    if pattern is not None:
        return Path(folder or "/"), pattern
    given = Path(folder)
    return (given.parent if given.is_file() else given), None


def located(source: SourceSpec, path: str) -> InputFile | None:
    """The local file ``path`` (links resolved) as :func:`list_input_files` would list it
    for ``source``, with its root and relative path; None if the source's rules would not
    list it (or it is gone). For a file found some other way: by a stream."""
    given, pattern = _local_root(source)
    root = str(given.resolve())
    base = root.rstrip("/") + "/"
    if pattern is not None:
        wanted = path.startswith(base) and _matches(path[len(base) :].split("/"), pattern)
    elif Path(source.path).is_file():
        wanted = path == str(Path(source.path).resolve())
        path = base + Path(source.path).name
    else:
        wanted = path.startswith(base) and _visible(Path(path), Path(base))
    if not wanted:
        return None
    try:
        return InputFile.at(Path(path), path[len(base) :], root)
    except FileNotFoundError:
        return None


def list_input_files(source: SourceSpec, on_event: EventSink = ignore_events) -> list[InputFile]:
    """The files of ``source``: the file, the visible files under the folder, or the glob's,
    each with its root and relative path. Broken links go to ``on_event`` as warnings (see
    the module's notes); a source whose only files are broken links is a LoadError."""
    if is_uri(source.path):
        return _list_remote(source)
    links = _Links(source, on_event)
    given, pattern = _local_root(source)
    if pattern is not None:
        found = _glob_local(given, pattern, links)
    elif Path(source.path).is_file():
        found = [Path(source.path)]
    elif given.is_dir():
        found = sorted(p for p in given.rglob("*") if _visible(p, given) and links.is_file(p))
    else:
        raise LoadError(missing_source(source))
    root, cut = str(given.resolve()), len(os.path.join(given, ""))
    files = [InputFile.at(p, str(p)[cut:], root) for p in found]  # found lies under given
    links.refuse_if_only_links(files)
    return files
