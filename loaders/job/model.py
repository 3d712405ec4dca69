"""The job model: a job file validated into frozen dataclasses.

A job mirrors a Hydra job config (see the README): ``shards``, ``source`` (a
list consumed in order), ``map`` (``fields``, ``filter_in``, ``filter_out``)
and ``tree.root`` (path elements). Relative paths resolve against the job
file's folder; a URI (``s3://bucket/in/``) stays as it is. Every error points at
the offending value in the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from loaders.filters.catalogue import (
    BundleFilter,
    FieldMapping,
    fields_named,
    parse_bundle_filter,
    parse_fields,
)
from loaders.job.text import JobText, KeyPath, read_job_file
from treestore.filesystems import is_uri
from treestore.sharding import HASH_NAME

__all__ = ["AttachmentSpec", "ElementSpec", "JobSpec", "MapSpec", "SourceSpec", "load_job"]

FORMATS = ("csv", "tsv", "json", "parquet")
ELEMENT_TYPES = ("const", "value", "branch")
_ATTACHMENT_KEYS = {
    "sum": {"type", "key", "value", "countMissing"},
    "count": {"type", "key"},
    "key.top": {"type", "key", "size"},
    "time": {"type", "key"},
}


@dataclass(frozen=True)
class SourceSpec:
    """One input source of a job."""

    name: str
    path: str  # absolute: a file, a folder or a glob
    format: Literal["csv", "tsv", "json", "parquet"]
    header: bool = True
    columns: tuple[str, ...] = ()
    shard_by: str | None = None
    inject_source_name: str | None = None
    dedup_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class AttachmentSpec:
    """One entry of an element's ``data``: a named summary kept on each node it visits."""

    name: str
    kind: str  # one of treestore.attachments.KINDS
    key: str | None
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def settings(self) -> dict[str, Any]:
        """The options as a dict."""
        return dict(self.options)


def _whole(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


@dataclass(frozen=True)
class ElementSpec:
    """One element of ``tree.root``: ``const``, ``value`` or ``branch``.

    ``value`` is a const's name, or a value element's default for a missing
    field; ``label`` (Hydra's ``name``) puts a const node of that name above the
    element's nodes; ``once`` visits a node only when it is created; ``count``
    false leaves hits unchanged (data still updates); ``pending`` (update-only
    elements, job key ``pending: {"loads": N, "time": FIELD, "delay": D}``) keeps a
    record whose node does not exist yet and retries it in later loads: in at most
    ``pending_loads`` of them (0: no limit), and while its time is not below the
    shard's watermark (the largest ``pending_time`` seen, minus ``pending_delay``).
    """

    kind: Literal["const", "value", "branch"]
    where: str
    value: str | None = None
    key: str | None = None
    create: bool = True
    filter: BundleFilter | None = None
    branches: tuple[tuple[ElementSpec, ...], ...] = ()
    once: bool = False
    count: bool = True
    label: str | None = None
    data: tuple[AttachmentSpec, ...] = ()
    pending_loads: int = 0
    pending_time: str | None = None
    pending_delay: int = 0
    path: KeyPath = ()
    """Where the element is in the job file: ``("tree", "root", 1, ...)``."""

    @property
    def place(self) -> str:
        """Where the element is in the tree, whatever the job file's name: ``tree.root.1...``."""
        return ".".join(str(p) for p in self.path)

    @property
    def pending(self) -> bool:
        """Whether records that find no node wait for later loads (``pending`` is set)."""
        return bool(self.pending_loads or self.pending_time)

    def walk(self) -> list[ElementSpec]:
        """This element and every element nested in its branches."""
        found = [self]
        for branch in self.branches:
            for element in branch:
                found.extend(element.walk())
        return found


@dataclass(frozen=True)
class MapSpec:
    """The ``map`` section: projection and record filters."""

    fields: tuple[FieldMapping, ...] = ()
    filter_in: BundleFilter | None = None
    filter_out: BundleFilter | None = None


@dataclass(frozen=True)
class JobSpec:
    """A whole validated job."""

    file: str
    shards: int
    sources: tuple[SourceSpec, ...]
    map: MapSpec
    tree: tuple[ElementSpec, ...]
    hash: str = HASH_NAME

    def elements(self) -> list[ElementSpec]:
        """Every tree element, nested ones included."""
        return [found for element in self.tree for found in element.walk()]

    def input_fields(self, source: SourceSpec | None = None) -> set[str]:
        """Every field name the job (for ``source``: that source's records) reads or sets.

        What the readers keep of a record.
        """
        names: set[str] = set()
        for spec in self.sources if source is None else [source]:
            names.update(spec.dedup_keys)
            if spec.shard_by:
                names.add(spec.shard_by)
        for mapping in self.map.fields:
            names.add(mapping.source)
        names |= fields_named(self.map.filter_in) | fields_named(self.map.filter_out)
        for element in self.elements():
            names |= fields_named(element.filter)
            if element.key:
                names.add(element.key)
            names.update(a.key for a in element.data if a.key)
            if element.pending_time:
                names.add(element.pending_time)
        return names


class _Validator:
    def __init__(self, job: JobText, base: Path) -> None:
        self.job = job
        self.base = base

    def dict_at(self, value: Any, path: KeyPath, known: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.job.error(path, f"expected an object, found {type(value).__name__}")
        self.job.check_keys(value, path, known)
        return value

    def text(
        self, doc: dict[str, Any], key: str, path: KeyPath, required: bool = False
    ) -> str | None:
        if key not in doc:
            if required:
                raise self.job.error(path, f"{key!r} is required")
            return None
        value = doc[key]
        if not isinstance(value, str) or not value:
            raise self.job.error((*path, key), f"{key!r} must be a non-empty string")
        return value

    def flag(self, doc: dict[str, Any], key: str, path: KeyPath, default: bool) -> bool:
        value = doc.get(key, default)
        if not isinstance(value, bool):
            raise self.job.error((*path, key), f"{key!r} must be true or false")
        return value

    def names(self, value: Any, path: KeyPath) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.job.error(path, "expected a list of field names")
        return tuple(value)

    def source(self, doc: Any, path: KeyPath, shards: int) -> SourceSpec:
        known = {
            "name",
            "path",
            "format",
            "header",
            "columns",
            "shard_by",
            "inject_source_name",
            "dedup",
        }
        doc = self.dict_at(doc, path, known)
        fmt = self.text(doc, "format", path, required=True)
        if fmt not in FORMATS:
            raise self.job.error(
                (*path, "format"), f"unknown format {fmt!r}", hint="Use " + ", ".join(FORMATS) + "."
            )
        shard_by = self.text(doc, "shard_by", path)
        if shards > 1 and shard_by is None:
            raise self.job.error(
                path, "'shard_by' is required when the job has more than one shard"
            )
        dedup_keys: tuple[str, ...] = ()
        if "dedup" in doc:
            dedup = self.dict_at(doc["dedup"], (*path, "dedup"), {"keys"})
            dedup_keys = self.names(dedup.get("keys"), (*path, "dedup", "keys"))
        raw_path = self.text(doc, "path", path, required=True)
        assert raw_path is not None
        if "\x00" in raw_path:
            raise self.job.error((*path, "path"), "a path cannot hold a NUL character (\\u0000)")
        return SourceSpec(
            name=self.text(doc, "name", path) or f"source{path[-1]}",
            path=_source_location(raw_path, self.base),
            format=fmt,  # type: ignore[arg-type]
            header=self.flag(doc, "header", path, True),
            columns=self.names(doc["columns"], (*path, "columns")) if "columns" in doc else (),
            shard_by=shard_by,
            inject_source_name=self.text(doc, "inject_source_name", path),
            dedup_keys=dedup_keys,
        )

    def attachments(self, doc: Any, path: KeyPath) -> tuple[AttachmentSpec, ...]:
        if not isinstance(doc, dict) or not doc:
            raise self.job.error(path, "'data' must be an object: attachment name -> settings")
        found = []
        for name, body in doc.items():
            where = (*path, name)
            kind = body.get("type") if isinstance(body, dict) else None
            if not isinstance(kind, str) or kind not in _ATTACHMENT_KEYS:
                raise self.job.error(
                    (*where, "type") if isinstance(body, dict) and "type" in body else where,
                    f"unknown attachment type {kind!r}",
                    hint="Use " + ", ".join(_ATTACHMENT_KEYS) + ".",
                )
            body = self.dict_at(body, where, _ATTACHMENT_KEYS[kind])
            key = self.text(body, "key", where, required=kind != "sum")
            options: dict[str, Any] = {}
            if kind == "key.top":
                size = body.get("size")
                if not _whole(size, 1, 1 << 62):
                    raise self.job.error(
                        (*where, "size") if "size" in body else where,
                        "a key.top needs a 'size': how many keys it keeps (at least 1)",
                    )
                options["size"] = size
            if kind == "sum":
                value = body.get("value", 0)
                if not isinstance(value, int | float) or isinstance(value, bool):
                    raise self.job.error((*where, "value"), "'value' must be a number")
                options["value"] = value
                options["countMissing"] = self.flag(body, "countMissing", where, True)
            found.append(AttachmentSpec(name, kind, key, tuple(sorted(options.items()))))
        return tuple(found)

    def element(self, doc: Any, path: KeyPath) -> ElementSpec:
        if not isinstance(doc, dict):
            raise self.job.error(path, "a path element must be an object with a 'type'")
        kind = doc.get("type")
        if kind not in ELEMENT_TYPES:
            raise self.job.error(
                (*path, "type") if "type" in doc else path,
                f"unknown element type {kind!r}" if "type" in doc else "the element has no 'type'",
                hint="Use const, value or branch.",
            )
        common = {"type", "create", "filter", "once", "count", "name", "data", "pending"}
        extra = {"const": {"value"}, "value": {"key", "value"}, "branch": {"list"}}[kind]
        self.dict_at(doc, path, common | extra)
        where = f"{self.job.file}: " + ".".join(str(p) for p in path)
        options: dict[str, Any] = {
            "create": self.flag(doc, "create", path, True),
            "once": self.flag(doc, "once", path, False),
            "count": self.flag(doc, "count", path, True),
            "label": self.text(doc, "name", path),
            "data": self.attachments(doc["data"], (*path, "data")) if "data" in doc else (),
            "filter": parse_bundle_filter(doc["filter"], (*path, "filter"), self.job)
            if "filter" in doc
            else None,
            **(self.pending(doc, path) if "pending" in doc else {}),
            "path": path,
        }
        if kind == "const":
            value = doc.get("value")
            if not isinstance(value, str | int) or value == "":
                raise self.job.error(
                    (*path, "value") if "value" in doc else path,
                    "a const needs a non-empty 'value'",
                )
            return ElementSpec("const", where, value=str(value), **options)
        if kind == "value":
            key = self.text(doc, "key", path)
            if key is None:
                raise self.job.error(path, "a value element needs a 'key' (the field to read)")
            return ElementSpec(
                "value", where, key=key, value=self.text(doc, "value", path), **options
            )
        if options["data"]:
            raise self.job.error((*path, "data"), "a branch keeps no data; put it on its elements")
        lists = doc.get("list")
        if not isinstance(lists, list) or not lists:
            raise self.job.error(
                (*path, "list") if "list" in doc else path,
                "a branch needs a 'list' of element lists",
            )
        branches = tuple(self.element_list(b, (*path, "list", i)) for i, b in enumerate(lists))
        return ElementSpec("branch", where, branches=branches, **options)

    def pending(self, doc: dict[str, Any], path: KeyPath) -> dict[str, Any]:
        """``pending: {"loads": N, "time": FIELD, "delay": D}``: how long a record that found
        no node waits for it (in loads, or until the watermark of its time passes it)."""
        where = (*path, "pending")
        if doc.get("create", True) or doc.get("once", False) or doc.get("type") == "branch":
            raise self.job.error(
                where,
                "'pending' is for update-only elements",
                hint='Use it on a const or value element with "create": false (and no "once").',
            )
        body = self.dict_at(doc["pending"], where, {"loads", "time", "delay"})
        if "loads" not in body and "time" not in body:
            raise self.job.error(
                where,
                "'pending' needs 'loads' (how many later loads retry a record), or 'time' and "
                "'delay' (a watermark on a time field), or both",
            )
        loads = body.get("loads", 0)
        if "loads" in body and not _whole(loads, 1, 1000):
            raise self.job.error(
                (*where, "loads"),
                "'loads' must be a whole number from 1 to 1000: how many later loads retry "
                "a record whose node does not exist yet",
            )
        time_field = self.text(body, "time", where)
        delay = body.get("delay", 0)
        if time_field is not None and ("delay" not in body or not _whole(delay, 0, 1 << 62)):
            raise self.job.error(
                (*where, "delay") if "delay" in body else where,
                "a 'time' needs a 'delay': a whole number of the time field's units (records "
                "older than the newest time seen minus the delay expire)",
            )
        if time_field is None and "delay" in body:
            raise self.job.error((*where, "delay"), "a 'delay' needs a 'time' field")
        return {"pending_loads": loads, "pending_time": time_field, "pending_delay": delay}

    def element_list(self, doc: Any, path: KeyPath) -> tuple[ElementSpec, ...]:
        if not isinstance(doc, list) or not doc:
            raise self.job.error(path, "expected a non-empty list of path elements")
        return tuple(self.element(e, (*path, i)) for i, e in enumerate(doc))

    def job_spec(self) -> JobSpec:
        doc = self.dict_at(self.job.content, (), {"shards", "hash", "source", "map", "tree"})
        shard_hash = self.text(doc, "hash", ()) or HASH_NAME
        if shard_hash != HASH_NAME:
            raise self.job.error(
                ("hash",),
                f"unknown shard hash {shard_hash!r}",
                hint=f"The one shard hash is {HASH_NAME!r} (see the README's Sharding).",
            )
        shards = doc.get("shards", 8)
        if not _whole(shards, 1, 65536):
            raise self.job.error(("shards",), "'shards' must be a whole number from 1 to 65536")
        sources = doc.get("source")
        if isinstance(sources, dict):
            sources = [sources]
        if not isinstance(sources, list) or not sources:
            raise self.job.error(
                ("source",) if "source" in doc else (), "the job needs a 'source' list"
            )
        specs = tuple(self.source(s, ("source", i), shards) for i, s in enumerate(sources))
        names = [s.name for s in specs]
        for i, name in enumerate(names):
            if names.index(name) != i:
                raise self.job.error(("source", i, "name"), f"two sources are called {name!r}")
        map_doc = self.dict_at(doc.get("map", {}), ("map",), {"fields", "filter_in", "filter_out"})
        map_spec = MapSpec(
            fields=parse_fields(map_doc["fields"], ("map", "fields"), self.job)
            if "fields" in map_doc
            else (),
            filter_in=parse_bundle_filter(map_doc["filter_in"], ("map", "filter_in"), self.job)
            if "filter_in" in map_doc
            else None,
            filter_out=parse_bundle_filter(map_doc["filter_out"], ("map", "filter_out"), self.job)
            if "filter_out" in map_doc
            else None,
        )
        tree = self.dict_at(doc.get("tree"), ("tree",), {"root"}) if "tree" in doc else None
        if tree is None or "root" not in tree:
            raise self.job.error(
                ("tree",) if tree is not None else (), "the job needs 'tree': {'root': [...]}"
            )
        elements = self.element_list(tree["root"], ("tree", "root"))
        timed = [e for element in elements for e in element.walk() if e.pending_time]
        for other in timed[1:]:
            if other.pending_time != timed[0].pending_time:
                raise self.job.error(
                    (*other.path, "pending", "time"),
                    f"every pending element of a job waits on one time field; this one names "
                    f"{other.pending_time!r}, another {timed[0].pending_time!r}",
                )
        return JobSpec(self.job.file, shards, specs, map_spec, elements, shard_hash)


def load_job(path: str | Path) -> JobSpec:
    """Read and validate the job file at ``path``."""
    job = read_job_file(path)
    return _Validator(job, Path(path).resolve().parent).job_spec()


def _source_location(raw: str, base: Path) -> str:
    """A source's ``path`` as a location: a URI as written (``file://`` as its local path),
    a relative path made absolute against the job file's folder ``base`` (links kept, so
    a link that leads nowhere is reported as the link)."""
    if raw.startswith("file://"):
        raw = raw.removeprefix("file://") or "/"
    if is_uri(raw) or Path(raw).is_absolute():
        return raw
    return os.path.abspath(base / raw)  # normalised, links kept
