"""Value filters on text: ``empty``, ``case``, ``default``, ``pad``, ``regex``,
``replace``, ``require`` and ``exclude``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from loaders.filters.kinds import FilterCompiler, Settings, ValueFilter, ValueKind, value_filter

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["Case", "Default", "Empty", "Match", "Pad", "Regex", "Replace"]


@value_filter
class Empty(ValueKind):
    """``empty``: the value if it is empty (``not``: if it is not), else null."""

    name = "empty"
    keys = frozenset({"not"})

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        return {"not": settings.flag("not", False)}

    @staticmethod
    def spark(spec: ValueFilter, compiler: FilterCompiler) -> Callable[[Column], Column]:
        from pyspark.sql import functions as F

        if spec.get("not"):
            return lambda x: F.when(x != "", x)
        return lambda x: F.when(x == "", x)

    @staticmethod
    def arrow(spec: ValueFilter) -> Callable[[pa.Array], pa.Array]:
        test = pc.not_equal if spec.get("not") else pc.equal
        return lambda x: pc.if_else(test(x, ""), x, pa.nulls(len(x), x.type))


@value_filter
class Case(ValueKind):
    """``case``: the text in lower and/or upper case."""

    name = "case"
    keys = frozenset({"lower", "upper"})

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        return {"lower": settings.flag("lower", False), "upper": settings.flag("upper", False)}

    @staticmethod
    def spark(spec: ValueFilter, compiler: FilterCompiler) -> Callable[[Column], Column]:
        from pyspark.sql import functions as F

        def case(x: Column) -> Column:
            if spec.get("lower"):
                x = F.lower(x)
            return F.upper(x) if spec.get("upper") else x

        return case


@value_filter
class Default(ValueKind):
    """``default``: ``value`` when the input is null or empty."""

    name = "default"
    keys = frozenset({"value"})

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        return {"value": settings.text("value", empty_ok=True)}

    @staticmethod
    def spark(spec: ValueFilter, compiler: FilterCompiler) -> Callable[[Column], Column]:
        from pyspark.sql import functions as F

        return lambda x: F.when(x.isNull() | (x == ""), F.lit(spec.get("value"))).otherwise(x)


@value_filter
class Pad(ValueKind):
    """``pad``: padded to the pad's length with its leading characters (``left``/``right``)."""

    name = "pad"
    keys = frozenset({"left", "right"})

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        return {
            "left": settings.text("left", "", empty_ok=True),
            "right": settings.text("right", "", True),
        }

    @staticmethod
    def spark(spec: ValueFilter, compiler: FilterCompiler) -> Callable[[Column], Column]:
        from pyspark.sql import functions as F

        left, right = spec.get("left"), spec.get("right")

        def pad(x: Column) -> Column:
            x = F.coalesce(x, F.lit(""))
            if left:
                x = F.when(
                    F.length(x) < len(left),
                    F.concat(F.lit(left).substr(F.length(x) + 1, F.lit(len(left))), x),
                ).otherwise(x)
            if right:
                x = F.when(
                    F.length(x) < len(right),
                    F.concat(x, F.lit(right).substr(F.length(x) + 1, F.lit(len(right)))),
                ).otherwise(x)
            return x

        return pad


@value_filter
class Regex(ValueKind):
    """``regex``: every match's groups as a list; with ``replace``, the text with matches
    replaced (``$1``)."""

    name = "regex"
    keys = frozenset({"pattern", "replace"})

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        pattern = settings.regex("pattern", settings.text("pattern"))
        return {"pattern": pattern, "replace": settings.optional_text("replace")}

    @staticmethod
    def gives_array(spec: ValueFilter) -> bool:
        return spec.get("replace") is None

    @staticmethod
    def spark(spec: ValueFilter, compiler: FilterCompiler) -> Callable[[Column], Column]:
        from pyspark.sql import functions as F

        pattern, replacement = spec.get("pattern"), spec.get("replace")
        if replacement is not None:
            return lambda x: F.regexp_replace(x, pattern, replacement)
        groups = re.compile(pattern).groups

        def regex(x: Column) -> Column:
            if groups == 0:
                return F.when(x.isNotNull(), F.array().cast("array<string>"))
            found = [F.regexp_extract_all(x, F.lit(pattern), g) for g in range(1, groups + 1)]
            if groups == 1:
                return found[0]
            indexes = F.sequence(F.lit(0), F.greatest(F.size(found[0]) - 1, F.lit(0)))
            picked = F.flatten(
                F.transform(indexes, lambda i: F.array(*[F.get(g, i) for g in found]))
            )
            return F.when(F.size(found[0]) > 0, picked).otherwise(found[0])

        return regex


@value_filter
class Replace(ValueKind):
    """``replace``: every occurrence of ``find`` replaced (plain text unless ``regex``)."""

    name = "replace"
    keys = frozenset({"find", "replace", "regex"})

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        find, regex = settings.text("find"), settings.flag("regex", False)
        if regex:
            settings.regex("find", find)
        return {"find": find, "replace": settings.text("replace", "", True), "regex": regex}

    @staticmethod
    def spark(spec: ValueFilter, compiler: FilterCompiler) -> Callable[[Column], Column]:
        from pyspark.sql import functions as F

        find, replacement = spec.get("find"), spec.get("replace")
        if spec.get("regex"):
            return lambda x: F.regexp_replace(x, find, replacement)
        return lambda x: F.replace(x, F.lit(find), F.lit(replacement))


class Match(ValueKind):
    """``require`` / ``exclude``: the value if it matches one test (``exclude``: if none)."""

    keys = frozenset({"value", "contains", "match", "find", "toLower"})

    @classmethod
    def read(cls, settings: Settings) -> dict[str, Any]:  # type: ignore[override]
        sets = {k: settings.texts(k) for k in ("value", "contains", "match", "find")}
        for key in ("match", "find"):
            for pattern in sets[key]:
                settings.regex(key, pattern)
        if not any(sets.values()):
            raise settings.error(
                None, f"{cls.name!r} needs one of 'value', 'contains', 'match' or 'find'"
            )
        return {**sets, "toLower": settings.flag("toLower", False)}

    @staticmethod
    def spark(spec: ValueFilter, compiler: FilterCompiler) -> Callable[[Column], Column]:
        from pyspark.sql import functions as F

        def match(x: Column) -> Column:
            probe = F.lower(x) if spec.get("toLower") else x
            tests = [probe.isin(list(spec.get("value")))] if spec.get("value") else []
            tests += [probe.contains(part) for part in spec.get("contains")]
            tests += [probe.rlike(f"^(?:{p})$") for p in spec.get("match")]
            tests += [probe.rlike(p) for p in spec.get("find")]
            passes = tests[0]
            for test in tests[1:]:
                passes = passes | test
            passes = F.coalesce(passes, F.lit(False))
            return F.when(passes if spec.op == "require" else ~passes, x)

        return match


@value_filter
class Require(Match):
    """``require``: the value if it matches one of the tests, else null."""

    name = "require"


@value_filter
class Exclude(Match):
    """``exclude``: the value if it matches none of the tests, else null."""

    name = "exclude"
