"""Value filters that make, cut or join lists, and ``chain``: ``split``, ``slice``,
``join`` take an array whole; ``chain`` runs its filters in order (the compiler
follows it, see :meth:`loaders.filters.kinds.FilterCompiler.value`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from loaders.filters.arrow_compiler import split_lists
from loaders.filters.kinds import NoArrowForm, Settings, ValueFilter, ValueKind, value_filter

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["Chain", "Join", "Slice", "Split", "java_regex_literal"]


def java_regex_literal(text: str) -> str:
    """A Java regex matching ``text`` literally (non-alphanumerics backslash-escaped).

    >>> java_regex_literal("a.b|c")
    'a\\\\.b\\\\|c'
    """
    return "".join(c if c.isalnum() else "\\" + c for c in text)


def _slice_bounds(size: Column, start: int, stop: int) -> tuple[Column, Column]:
    """1-based start and length of ``[start:stop]`` (Python rules; ``stop`` -1 = the end)."""
    from pyspark.sql import functions as F

    low = F.lit(start) if start >= 0 else F.greatest(size + start, F.lit(0))
    high = size if stop == -1 else (F.least(F.lit(stop), size) if stop >= 0 else size + stop)
    return F.least(low, size) + 1, F.greatest(high - low, F.lit(0))


@value_filter
class Split(ValueKind):
    """``split``: the list of pieces (``split``, default ``,``; or ``fixedLength``)."""

    name = "split"
    keys = frozenset({"split", "fixedLength"})
    whole = True

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        return {
            "split": settings.text("split", ","),
            "fixedLength": settings.whole("fixedLength", -1),
        }

    @staticmethod
    def spark_whole(spec: ValueFilter, column: Column, is_array: bool) -> tuple[Column, bool]:
        from pyspark.sql import functions as F

        width = spec.get("fixedLength")
        if width > 0:
            pattern = F.lit(f"(?s).{{1,{width}}}")

            def split(x: Column) -> Column:
                return F.regexp_extract_all(x, pattern, 0)
        else:
            separator = java_regex_literal(spec.get("split"))

            def split(x: Column) -> Column:
                return F.split(x, separator, -1)

        if is_array:
            return F.flatten(F.transform(column, split)), True
        return F.when(column != "", split(column)), True

    @staticmethod
    def arrow_whole(spec: ValueFilter, column: pa.Array, is_array: bool) -> tuple[pa.Array, bool]:
        if spec.get("fixedLength") > 0:  # Java's regex '.' over UTF-16: not mirrored
            raise NoArrowForm("split with fixedLength")
        separator, size = spec.get("split"), len(column)
        if not is_array:  # null, and no list, for a null or empty text
            empty = ~pc.fill_null(pc.not_equal(column, ""), False).to_numpy(zero_copy_only=False)
            return split_lists(column, separator, np.arange(size), size, empty), True
        texts = pc.list_flatten(column)
        parents = pc.list_parent_indices(column).to_numpy()
        # Spark's flatten: a list holding a null gives null
        null_where = ~column.is_valid().to_numpy(zero_copy_only=False)
        null_where[parents[~texts.is_valid().to_numpy(zero_copy_only=False)]] = True
        return split_lists(texts, separator, parents, size, null_where), True


@value_filter
class Slice(ValueKind):
    """``slice``: a slice of a list or a text (``from`` 0, ``to`` -1 = the end)."""

    name = "slice"
    keys = frozenset({"from", "to"})
    whole = True

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        return {"from": settings.whole("from", 0), "to": settings.whole("to", -1)}

    @staticmethod
    def spark_whole(spec: ValueFilter, column: Column, is_array: bool) -> tuple[Column, bool]:
        from pyspark.sql import functions as F

        size = F.size(column) if is_array else F.length(column)
        start, length = _slice_bounds(size, spec.get("from"), spec.get("to"))
        if is_array:
            return F.slice(column, start, length), True
        return column.substr(start, length), False


@value_filter
class Join(ValueKind):
    """``join``: a list joined into one text (``join``, default ``,``)."""

    name = "join"
    keys = frozenset({"join"})
    whole = True

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        return {"join": settings.text("join", ",", empty_ok=True)}

    @staticmethod
    def spark_whole(spec: ValueFilter, column: Column, is_array: bool) -> tuple[Column, bool]:
        from pyspark.sql import functions as F

        return (F.array_join(column, spec.get("join")) if is_array else column), False


@value_filter
class Chain(ValueKind):
    """``chain``: the filters in order; stops at the first null (``nullStop``, true)."""

    name = "chain"
    keys = frozenset({"filter", "nullStop"})
    whole = True

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        return {"nullStop": settings.flag("nullStop", True)}

    @staticmethod
    def spark_whole(spec: ValueFilter, column: Column, is_array: bool) -> tuple[Column, bool]:
        raise AssertionError("the compiler runs a chain's filters itself")
