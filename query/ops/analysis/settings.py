"""The ``A:B:C`` settings some analysis ops take: numbers with defaults."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from query.ops.base import LARGEST_WHOLE, OpArgs, as_number, whole_argument

__all__ = ["colon_settings"]


def colon_settings(
    args: OpArgs,
    defaults: Sequence[float],
    whole: set[int] | frozenset[int],
    hint: str,
    check: Callable[[int, float], str | None] | None = None,
) -> list[float]:
    """The op's ``:``-separated numbers, each in place of its default; the places in
    ``whole`` take whole numbers only. ``check(place, number)`` may refuse a number with
    a reason. A bad word is an error at its column."""
    words = args.text.split(":") if args.text else []
    if len(words) > len(defaults):
        raise args.error(0, f"expected at most {len(defaults)} settings", hint=hint)
    settings = list(defaults)
    start = 0
    for position, word in enumerate(words):
        is_whole = position in whole
        number = (
            whole_argument(args, word, start, "a setting", smallest=-LARGEST_WHOLE)
            if is_whole and word.strip().lstrip("-").isdigit()
            else as_number(word)
        )
        if number is None or (is_whole and not isinstance(number, int)):
            raise args.error(start, f"{word!r} is not a {'whole ' if is_whole else ''}number")
        if not math.isfinite(number):
            raise args.error(start, f"{word!r} is not a finite number")
        refused = check(position, number) if check is not None else None
        if refused:
            raise args.error(start, f"{word!r}: {refused}")
        settings[position] = number
        start += len(word) + 1
    return settings
