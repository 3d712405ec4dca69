"""Settings read from ``TREESTORE_*`` environment variables."""

from __future__ import annotations

import os

from treestore.errors import SettingError

__all__ = ["env_number"]


def env_number(name: str, default: float, whole: bool = False) -> float:
    """The number in environment variable ``name`` (``default`` when unset); a
    :class:`SettingError` naming the variable and its value when it is not one.

    >>> env_number("TREESTORE_EXAMPLE_UNSET", 256)
    256
    """
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        return int(text) if whole else float(text)
    except ValueError:
        kind = "a whole number" if whole else "a number"
        raise SettingError(
            f"{name}={text!r} is not {kind}; set it to {kind} (default {default}) or unset it."
        ) from None
