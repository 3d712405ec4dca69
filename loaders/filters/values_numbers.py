"""Value filters that compute numbers: ``hash`` and ``mod``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loaders.filters.kinds import FilterCompiler, Settings, ValueFilter, ValueKind, value_filter

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["HASH_TYPES", "Hash", "Mod"]

HASH_TYPES = {0: "Java String.hashCode", 3: "the first 8 bytes of SHA-1", 4: "SHA-1 as hex"}


def _java_hash_code(x: Column) -> Column:
    """Java's ``String.hashCode`` (UTF-16 units; exact for text in the Basic Multilingual Plane)."""
    from pyspark.sql import functions as F

    folded = F.aggregate(
        F.split(x, "", -1),
        F.lit(0).cast("long"),
        lambda acc, ch: (acc * 31 + F.ascii(ch)) % F.lit(1 << 32),
    )
    return F.when(folded >= 1 << 31, folded - (1 << 32)).otherwise(folded)


@value_filter
class Hash(ValueKind):
    """``hash``: the hash as text: ``type`` 0 (Java ``String.hashCode``), 3 (first 8 bytes of
    SHA-1), 4 (SHA-1 hex); ``abs``."""

    name = "hash"
    keys = frozenset({"type", "abs"})

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        kind = settings.whole("type", 0)
        if kind not in HASH_TYPES:
            raise settings.error(
                "type",
                f"hash type {kind} is not available; use "
                + ", ".join(f"{k} ({v})" for k, v in HASH_TYPES.items()),
            )
        return {"type": kind, "abs": settings.flag("abs", False)}

    @staticmethod
    def spark(spec: ValueFilter, compiler: FilterCompiler) -> Callable[[Column], Column]:
        from pyspark.sql import functions as F

        kind = spec.get("type")

        def hashed(x: Column) -> Column:
            if kind == 4:
                return F.sha1(x)
            number = (
                _java_hash_code(x)
                if kind == 0
                else F.conv(F.substring(F.sha1(x), 1, 16), 16, -10).cast("long")
            )
            return (F.abs(number) if spec.get("abs") else number).cast("string")

        return hashed


@value_filter
class Mod(ValueKind):
    """``mod``: the whole number modulo ``mod`` (``abs`` true); a non-number rejects the record."""

    name = "mod"
    keys = frozenset({"mod", "abs"})

    @staticmethod
    def read(settings: Settings) -> dict[str, Any]:
        return {"mod": settings.whole("mod", 1, minimum=1), "abs": settings.flag("abs", True)}

    @staticmethod
    def spark(spec: ValueFilter, compiler: FilterCompiler) -> Callable[[Column], Column]:
        from pyspark.sql import functions as F

        divisor = spec.get("mod")

        def not_whole(x: Column) -> Column:
            return x.isNotNull() & x.try_cast("long").isNull()

        def mod(x: Column) -> Column:
            number = x.try_cast("long")
            compiler.reject_when(not_whole, "mod: a value is not a whole number")
            return ((F.abs(number) if spec.get("abs") else number) % divisor).cast("string")

        return mod
