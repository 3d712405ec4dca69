"""A query's plan: what runs where, decided once, before anything runs.

A :class:`QueryPlan` holds the parsed path, the rops and ops each split into the
leading ops that run on column chunks and the rest that run on rows, whether the
query walks on the driver or runs as one Spark job, which shards it reads and at
which version. The runner builds it (:func:`plan_query`), :class:`~query.driver.result.Rows`
is built from it and never changes it, and ``str(plan)`` says it in a few lines with
the reasons (``treestore query --explain``, ``\\explain`` in the shell, ``Rows.plan``).

Where a query runs: when the path's leading elements are name lookups
(``root/12345/...``) that reach at most ``local_limit`` children in all, across the
shards, the driver walks the trees itself, reading only those pages (a Spark job costs
more than the whole lookup); otherwise one Spark job runs a task per group of
consecutive shards.

Columns or rows: in a Spark task, a path without attachments, fields, traps or
references walks on columns (:mod:`query.walk.column_engine`) and the leading rops that
have a column form (``str``, ``merge``...) run on those columns; the driver's walk uses
the row walker. When the path and every rop run on columns, the shards' pieces are
typed columns, and the leading driver ops that can (``gather``, ``merge``, ``sort``...)
run on them as Arrow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from query.ops.base import Op
from query.ops.columns import ColumnType
from query.ops.compiler import OpsPipeline, compile_ops
from query.syntax.ast import Element, Path
from query.syntax.path_parser import parse_path
from query.walk.column_engine import column_types, rows_reason
from treestore.storage.tree import ShardTree

__all__ = [
    "LOCAL_LIMIT_SETTING",
    "OpsSplit",
    "QueryPlan",
    "QueryRequest",
    "Where",
    "named_columns",
    "plan_query",
]

Where = Literal["driver", "spark", "nowhere"]
"""Where the path runs: walked on the driver, in one Spark job, or nowhere (no shards)."""

LOCAL_LIMIT_SETTING = "TREESTORE_LOCAL_QUERY_LIMIT"
"""The environment variable that sets how many children a driver walk may reach."""


@dataclass(frozen=True)
class OpsSplit:
    """Ops split in two: the leading ones that run on column chunks, the rest on rows.

    ``input_types`` are the column types the ops get (``None``: they get rows, so every
    op runs on rows).
    """

    pipeline: OpsPipeline = field(default_factory=OpsPipeline)
    input_types: tuple[ColumnType, ...] | None = None
    on_columns: tuple[Op, ...] = ()
    on_rows: OpsPipeline = field(default_factory=OpsPipeline)

    @classmethod
    def of(cls, pipeline: OpsPipeline, types: list[ColumnType] | None) -> OpsSplit:
        """``pipeline`` split for input typed ``types`` (``None``: rows)."""
        if types is None or not pipeline:
            return cls(pipeline, None if types is None else tuple(types), (), pipeline)
        on_columns, on_rows = pipeline.column_prefix(types)
        return cls(pipeline, tuple(types), on_columns, on_rows)

    def output_types(self) -> list[ColumnType] | None:
        """The column types after every op, when every op runs on columns; else ``None``."""
        if self.input_types is None or self.on_rows:
            return None
        types = list(self.input_types)
        for op in self.on_columns:
            types = op.column_types(types) or []
        return types

    def describe(self, input_kind: str) -> str:
        """The split in words, e.g. ``on columns: str, merge; on rows: num (num takes
        rows, not these columns)``."""
        if not self.pipeline:
            return "none"
        parts = []
        if self.on_columns:
            parts.append("on columns: " + ", ".join(op.name for op in self.on_columns))
        if self.on_rows:
            text = "on rows: " + ", ".join(op.name for op in self.on_rows.ops)
            if self.input_types is None:
                text += f" ({input_kind})"
            else:
                text += f" ({self.on_rows.ops[0].name}: no column form for these columns)"
            parts.append(text)
        return "; ".join(parts)


@dataclass(frozen=True)
class QueryPlan:
    """One query, planned: every choice made before a row is read.

    ``path_on_columns``: whether a shard's task walks the path on columns (a driver walk
    always walks rows); ``rops``: the rops as they split in the shards; ``piece_types``:
    the column types of every piece the shards send when the path and all the rops run
    on columns (else ``None``); ``ops``: the driver's ops as they split over those
    pieces; ``where`` and ``where_reason``: walked on the driver or one Spark job, and
    why; ``shards``: the shards read, at store ``version`` of ``location``.
    """

    text: str
    path: Path
    rops: OpsSplit
    ops: OpsSplit
    piece_types: tuple[ColumnType, ...] | None
    path_on_columns: bool
    path_rows_reason: str | None
    where: Where
    where_reason: str
    shards: tuple[int, ...]
    version: int | None = None
    location: str | None = None
    labels: tuple[str, ...] | None = None
    types: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def over_pieces(
        cls,
        ops: OpsPipeline,
        piece_types: list[ColumnType] | None = None,
        labels: tuple[str, ...] | None = None,
        types: Mapping[str, str] | None = None,
    ) -> QueryPlan:
        """The plan of driver ``ops`` over pieces that come from elsewhere (no store, no
        path): typed ``piece_types`` when they are columns."""
        return cls(
            text="",
            path=Path(()),
            rops=OpsSplit(),
            ops=OpsSplit.of(ops, piece_types),
            piece_types=None if piece_types is None else tuple(piece_types),
            path_on_columns=False,
            path_rows_reason=None,
            where="nowhere",
            where_reason="the pieces are given",
            shards=(),
            labels=labels,
            types=dict(types or {}),
        )

    @property
    def runs_on_driver(self) -> bool:
        """Whether the path walks on the driver (no Spark job)."""
        return self.where == "driver"

    def to_dict(self) -> dict[str, object]:
        """The plan as plain values (JSON-ready): what ``--explain --format json`` prints,
        and what a program reads of it."""
        return {
            "path": self.text,
            "rops": self.rops.pipeline.text or None,
            "ops": self.ops.pipeline.text or None,
            "store": self.location,
            "version": self.version,
            "where": self.where,
            "why": self.where_reason,
            "shards": list(self.shards),
            "path_on": "columns" if self.path_on_columns else "rows",
            "path_rows_reason": self.path_rows_reason,
            "rops_on_columns": [op.name for op in self.rops.on_columns],
            "rops_on_rows": [op.name for op in self.rops.on_rows.ops],
            "pieces": None if self.piece_types is None else list(self.piece_types),
            "ops_on_columns": [op.name for op in self.ops.on_columns],
            "ops_on_rows": [op.name for op in self.ops.on_rows.ops],
            "columns": None if self.labels is None else list(self.labels),
        }

    def lines(self) -> list[str]:
        """The plan in a few readable lines (what ``--explain`` prints)."""
        query = self.text
        for kind, split in (("rops", self.rops), ("ops", self.ops)):
            if split.pipeline:
                query += f" | {kind} {split.pipeline.text}"
        at = f", version {self.version}" if self.version is not None else ""
        lines = [f"query {query}", f"  store   {self.location or '-'}{at}"]
        shards = _shard_list(self.shards)
        if self.where == "driver":
            lines.append(f"  run     on the driver, no Spark job; shards {shards}")
        elif self.where == "spark":
            lines.append(
                f"  run     one Spark job, a task per group of consecutive shards; shards {shards}"
            )
        else:
            lines.append("  run     nothing to read")
        lines.append(f"          because {self.where_reason}")
        if self.where == "driver":
            walk = "the path and rops on rows (the driver walks few nodes with the row walker)"
        elif self.path_on_columns:
            walk = "the path on columns" + (
                f"; rops {self.rops.describe('')}" if self.rops.pipeline else ""
            )
        else:
            walk = f"the path on rows, because {self.path_rows_reason}"
            walk += "; rops on rows" if self.rops.pipeline else ""
        lines.append(f"  shards  {walk}")
        lines.append(f"  pieces  {self._pieces()}")
        lines.append(f"  driver  ops {self.ops.describe('the pieces are rows')}")
        return lines

    def _pieces(self) -> str:
        """What the shards send, and why rows when they are rows."""
        if self.piece_types is not None:
            if self.where == "driver":
                return "rows, made typed columns on the driver"
            return "typed columns (Arrow)"
        if self.path_rows_reason is not None:
            return "rows (the path runs on rows)"
        first = self.rops.on_rows.ops[0].name if self.rops.on_rows else "a rop"
        return f"rows ({first} runs on rows)"

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _shard_list(shards: tuple[int, ...]) -> str:
    """``0-7`` for consecutive shards, else the list (``1, 5``); ``none``."""
    if not shards:
        return "none"
    if len(shards) > 2 and list(shards) == list(range(shards[0], shards[-1] + 1)):
        return f"{shards[0]}-{shards[-1]} ({len(shards)})"
    return ", ".join(map(str, shards))


def _leading_lookups(path: Path) -> list[Element]:
    """The path's leading elements that are plain name lookups (no default)."""
    leading = []
    for element in path.elements:
        if element.kind != "names" or element.default is not None:
            break
        leading.append(element)
    return leading


def _where(
    path: Path,
    shards: tuple[int, ...],
    tree_of: Callable[[int], ShardTree],
    local_limit: int,
) -> tuple[Where, str, tuple[int, ...]]:
    """Where the path runs, why, and which shards it reads."""
    if not shards:
        return "nowhere", "the store has no shard trees yet", shards
    if local_limit < 0:
        return "spark", f"walks on the driver are off ({LOCAL_LIMIT_SETTING}=-1)", shards
    leading = _leading_lookups(path)
    if not leading:
        first = str(path.elements[0]) if path.elements else ""
        return "spark", f"the path starts with {first!r}, not a name lookup", shards
    lookups = "/".join(map(str, leading))
    if len(leading) == len(path.elements):
        return "driver", f"the whole path is name lookups ({lookups})", shards
    reached = 0
    found = []
    for shard in shards:
        tree = tree_of(shard)
        nodes = [tree.root]
        for element in leading:
            nodes = [
                child
                for node in nodes
                for name in element.names
                if (child := tree.child(node, name)) is not None
            ]
        if nodes:
            found.append(shard)
        reached += sum(node.child_count for node in nodes)
        if reached > local_limit:
            return (
                "spark",
                f"the leading name lookups ({lookups}) reach more than {local_limit:,}"
                f" children (the limit: {LOCAL_LIMIT_SETTING})",
                shards,
            )
    return (
        "driver",
        f"the leading name lookups ({lookups}) reach {reached:,} children in all, at most"
        f" {local_limit:,} (the limit: {LOCAL_LIMIT_SETTING})",
        tuple(found),
    )


def named_columns(path: Path, columns: Mapping[str, tuple[str, ...]]) -> Path:
    """``path`` with the store's column names on the unlabeled node-name columns below a
    top-level node that has them (``seed/+/+/+`` of a sweep called ``seed``: ``id``,
    ``time``, ``value``); a ``{label}`` of the path's own wins. Only the levels straight
    below the first element are named: from a ``..`` on, depth is no longer level."""
    first = path.elements[0] if path.elements else None
    if first is None or first.kind != "names" or len(first.names) != 1:
        return path
    names = columns.get(first.names[0])
    if not names:
        return path
    elements = list(path.elements)
    for depth, name in enumerate(names, start=1):
        if depth >= len(elements) or elements[depth].kind == "up":
            break
        element = elements[depth]
        if element.show and element.label is None and element.kind != "data":
            elements[depth] = replace(element, label=name)
    return replace(path, elements=tuple(elements))


@dataclass(frozen=True)
class QueryRequest:
    """What a caller asks: a path, the rops run in each shard, the ops run on the driver
    (the command line, the shell and the Python API build one, and the plan starts here)."""

    path: str
    rops: str | None = None
    ops: str | None = None


def plan_query(
    request: QueryRequest,
    *,
    shards: tuple[int, ...],
    tree_of: Callable[[int], ShardTree],
    local_limit: int,
    version: int | None = None,
    location: str | None = None,
    columns: Mapping[str, tuple[str, ...]] | None = None,
) -> QueryPlan:
    """Plan ``request`` over ``shards`` (their trees from ``tree_of``); syntax errors are
    raised here. Reads only the pages of the path's leading name lookups, to choose
    between the driver and Spark. ``columns``: the store's column names of top-level
    nodes' levels (:func:`named_columns`)."""
    path = named_columns(parse_path(request.path), columns or {})
    rops_pipeline = compile_ops(request.rops)
    ops_pipeline = compile_ops(request.ops)
    where, why, read = _where(path, tuple(sorted(shards)), tree_of, local_limit)
    reason = rows_reason(path)
    path_types = column_types(path) if reason is None else None
    on_columns = reason is None and where != "driver"
    shard_split = OpsSplit.of(rops_pipeline, path_types if on_columns else None)
    piece_types = OpsSplit.of(rops_pipeline, path_types).output_types()
    path_names = path.labels()
    return QueryPlan(
        text=request.path,
        path=path,
        rops=shard_split,
        ops=OpsSplit.of(ops_pipeline, piece_types),
        piece_types=None if piece_types is None else tuple(piece_types),
        path_on_columns=on_columns,
        path_rows_reason=reason,
        where=where,
        where_reason=why,
        shards=read,
        version=version,
        location=location,
        labels=ops_pipeline.column_names(rops_pipeline.column_names(path_names)),
        types={n: t for n, t in zip(path_names, path.column_types(), strict=True) if t},
    )
