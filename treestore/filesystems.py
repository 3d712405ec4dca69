"""Where stores and input files live: a plain path or a URI, opened as a pyarrow filesystem.

A location is a local path (``/data/in``, ``in/``, ``~/x``) or a URI that pyarrow
knows (``file://``, ``s3://bucket/prefix``, ``gs://``, ``hdfs://``). Object stores
take their endpoint and credentials from the usual settings (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_REGION``, ``AWS_PROFILE`` and its files), so MinIO, R2 and real S3 need no code.

Spark executors need the same settings as the driver. :class:`FilesystemSettings`
captures them on the driver (a profile is resolved there into its keys) and a task
applies them before it opens anything: every Spark task of treestore that touches a
store or an input file takes the captured settings with it, whatever session runs it.
The captured values never appear in a message or a ``repr``.
"""

from __future__ import annotations

import functools
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from treestore.errors import StoreError, TreestoreError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyarrow import fs as pafs

__all__ = [
    "DRIVER_ONLY_ENV",
    "FilesystemSettings",
    "check_reachable",
    "describe_error",
    "input_file",
    "input_stream",
    "is_file",
    "is_uri",
    "open_location",
    "refuses_connections",
    "split_location",
]

CARRIED = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_EC2_METADATA_DISABLED",
)
"""The environment variables a task takes from the driver."""
_BUCKET_SCHEMES = frozenset({"s3", "gs", "gcs"})
DRIVER_ONLY_ENV = "TREESTORE_DRIVER_ONLY_PATHS"
"""Folders (``os.pathsep``-separated) that only the driver has: set on executors, a task
that opens a local path under one of them fails at once instead of reading by luck."""


def is_uri(location: str) -> bool:
    """Whether ``location`` is a URI (``scheme://...``) rather than a plain path."""
    return "://" in location


def open_location(
    location: str | os.PathLike[str], error: type[TreestoreError] = StoreError
) -> tuple[pafs.FileSystem, str]:
    """The filesystem of ``location`` and the path in it (a plain path: local, absolute).

    A URI pyarrow cannot open raises ``error`` naming the location and what to check.
    """
    from pyarrow import fs as pafs

    text = os.fspath(location)
    if not is_uri(text):
        return pafs.LocalFileSystem(), check_reachable(str(Path(text).expanduser().resolve()))
    if text.startswith("file://"):
        return pafs.LocalFileSystem(), check_reachable(text.removeprefix("file://") or "/")
    try:
        filesystem, path = pafs.FileSystem.from_uri(text)
    except (ValueError, OSError) as exc:
        raise error(
            f"Cannot open {text}: {_one_line(exc)}. Check the URI's scheme and, for an "
            "object store, AWS_ENDPOINT_URL and the credentials."
        ) from exc
    return filesystem, path.rstrip("/") or "/"


def split_location(
    location: str, error: type[TreestoreError] = StoreError
) -> tuple[pafs.FileSystem, str, str]:
    """``location``'s filesystem, its path there, and the prefix that makes a path of that
    filesystem a location again (``""`` for local paths, ``"s3://"``, ``"hdfs://host:port"``).

    ``file://`` URIs become plain local paths.
    """
    filesystem, path = open_location(location, error)
    text = os.fspath(location)
    if not is_uri(text) or text.startswith("file://"):
        return filesystem, path, ""
    at = text.find(path, text.index("://") + 3)
    return filesystem, path, text[:at] if at >= 0 else text.split("://")[0] + "://"


@functools.lru_cache(maxsize=16)
def _filesystem_at(authority: str, settings: tuple[tuple[str, str], ...]) -> pafs.FileSystem:
    """One filesystem per URI authority (and settings), reused by every file a task reads."""
    del settings  # part of the key only: new settings, a new filesystem
    filesystem, _ = open_location(authority + "/", StoreError)
    return filesystem


def _opened(location: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path of an input file's location (cached per authority)."""
    from pyarrow import fs as pafs

    if not is_uri(location):
        return pafs.LocalFileSystem(), check_reachable(location)
    if location.startswith("file://"):
        return pafs.LocalFileSystem(), check_reachable(location.removeprefix("file://"))
    scheme, rest = location.split("://", 1)
    host, _, inner = rest.partition("/")
    settings = tuple((name, os.environ.get(name, "")) for name in CARRIED)
    filesystem = _filesystem_at(f"{scheme}://{host}", settings)
    # object stores name files bucket/key; the others by their path on the host
    return filesystem, rest if scheme in _BUCKET_SCHEMES else "/" + inner


def input_stream(location: str) -> pa.NativeFile:
    """A file (a local path or a URI) opened for reading once through, decompressed by its
    extension (``.gz``, ``.bz2``, ``.zst``...). A local path in a folder only the driver has
    raises :class:`StoreError` (see :func:`check_reachable`)."""
    filesystem, path = _opened(location)
    return filesystem.open_input_stream(path, compression="detect")


def is_file(location: str) -> bool:
    """Whether a file (a local path or a URI) exists."""
    from pyarrow import fs as pafs

    filesystem, path = _opened(location)
    try:
        return bool(filesystem.get_file_info(path).type == pafs.FileType.File)
    except OSError:
        return False


def input_file(location: str) -> pa.NativeFile:
    """A file (a local path or a URI) opened for random access (Parquet footers)."""
    filesystem, path = _opened(location)
    return filesystem.open_input_file(path)


def check_reachable(path: str) -> str:
    """``path``, unless it lies in a folder that only the driver has (:data:`DRIVER_ONLY_ENV`,
    set in the executors' environment): then a :class:`StoreError` naming it."""
    for folder in filter(None, os.environ.get(DRIVER_ONLY_ENV, "").split(os.pathsep)):
        if path == folder or path.startswith(folder.rstrip("/") + "/"):
            raise StoreError(
                f"A task was given {path}, which only the driver has ({folder}). Put inputs "
                "and stores where every executor reaches them: a URI (s3://, hdfs://) or a "
                "folder mounted at the same path on every node."
            )
    return path


def _one_line(exc: BaseException) -> str:
    """An OSError from pyarrow's S3 client in one line, without request ids."""
    text = " ".join(str(exc).split())
    return text.split(" (Request ID")[0][:300]


_REFUSED = "the endpoint refuses connections (check AWS_ENDPOINT_URL)"
_HINTS = {
    "the bucket does not exist (create it, or fix the URI)": (
        "NO_SUCH_BUCKET", "NoSuchBucket", "not found. To create buckets"
    ),
    _REFUSED: ("NETWORK_CONNECTION", "Could not connect to the endpoint"),
    "access denied (check the credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)": (
        "ACCESS_DENIED", "AccessDenied", "InvalidAccessKeyId", "INVALID_ACCESS_KEY_ID",
        "SignatureDoesNotMatch", "SIGNATURE_DOES_NOT_MATCH",
    ),
}  # fmt: skip
"""What an object store's error means, by the codes its text holds."""


def _meaning(text: str) -> str | None:
    return next((m for m, codes in _HINTS.items() if any(c in text for c in codes)), None)


def describe_error(exc: BaseException) -> str:
    """The useful part of a filesystem error (a refused endpoint, a missing bucket, a
    denied access), in one line."""
    text = _one_line(exc)
    meaning = _meaning(text)
    return f"{meaning}: {text}" if meaning else text


def refuses_connections(exc: BaseException) -> bool:
    """Whether ``exc`` says the object store's endpoint refuses connections."""
    return _meaning(_one_line(exc)) == _REFUSED


def join(root: str, name: str) -> str:
    """``name`` under ``root`` in a filesystem's own path syntax."""
    return posixpath.join(root, name)


@dataclass(frozen=True)
class FilesystemSettings:
    """The driver's filesystem settings, for a task to apply (values hidden from ``repr``)."""

    values: tuple[tuple[str, str], ...] = ()

    @classmethod
    def capture(cls) -> FilesystemSettings:
        """The settings of this process; an ``AWS_PROFILE`` is resolved into its keys here,
        so executors need no profile files."""
        found = {name: os.environ[name] for name in CARRIED if os.environ.get(name)}
        if os.environ.get("AWS_PROFILE") and "AWS_ACCESS_KEY_ID" not in found:
            found.update(_profile_keys(os.environ["AWS_PROFILE"]))
        return cls(tuple(sorted(found.items())))

    def apply(self) -> None:
        """Set the captured settings in this process (a task's Python worker)."""
        for name, value in self.values:
            if os.environ.get(name) != value:
                os.environ[name] = value

    def __repr__(self) -> str:
        names = ", ".join(name for name, _ in self.values)
        return f"FilesystemSettings({names})"


def _profile_keys(profile: str) -> dict[str, str]:
    """The keys and region of an AWS profile, resolved with boto3 (empty if it has none)."""
    try:
        import boto3
    except ImportError:
        return {}
    session = boto3.Session(profile_name=profile)
    found: dict[str, str] = {}
    credentials = session.get_credentials()
    if credentials is not None:
        frozen = credentials.get_frozen_credentials()
        found["AWS_ACCESS_KEY_ID"] = frozen.access_key
        found["AWS_SECRET_ACCESS_KEY"] = frozen.secret_key
        if frozen.token:
            found["AWS_SESSION_TOKEN"] = frozen.token
    if session.region_name:
        found["AWS_REGION"] = session.region_name
    return found
