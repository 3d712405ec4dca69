"""Continuous loads (``treestore load --follow``): Spark's file stream over the job's
sources (``stream``), each micro-batch one load publishing one version (``batches``),
and the files a follower could not read, set aside until they change (``set_aside``).

``follow_job``, ``parse_trigger`` and ``FollowSummary`` load on first use (PEP 562), so
reading ``loaders.follow.set_aside`` (as ``treestore info`` does) stays light.

May import: ``loaders.job``, ``loaders.listing``, ``loaders.load``, ``treestore``,
``treestore.storage``, ``treestore.store``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loaders.follow.batches import FollowSummary
    from loaders.follow.stream import follow_job, parse_trigger

__all__ = ["FollowSummary", "follow_job", "parse_trigger"]


def __getattr__(name: str) -> Any:
    """``follow_job``, ``parse_trigger`` and ``FollowSummary``, imported when first asked for."""
    if name == "FollowSummary":
        from loaders.follow import batches

        return batches.FollowSummary
    if name in __all__:
        from loaders.follow import stream

        return getattr(stream, name)
    raise AttributeError(f"module 'loaders.follow' has no attribute {name!r}")
