"""Continuous loads (``treestore load --follow``): Spark's file stream over the job's
sources (``stream``), each micro-batch one load publishing one version (``batches``),
the files a follower could not read, set aside until they change (``set_aside``), and
its options (``options``: choices and defaults, and how ``--trigger`` reads).

``follow_job``, ``check_follow``, ``FollowSummary`` and the options load on first use
(PEP 562), so reading ``loaders.follow.set_aside`` (as ``treestore info`` does) stays light.

May import: ``loaders.job``, ``loaders.listing``, ``loaders.load``, ``treestore``,
``treestore.storage``, ``treestore.store``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loaders.follow.batches import FollowSummary
    from loaders.follow.options import FollowOptions, parse_trigger
    from loaders.follow.stream import check_follow, follow_job

__all__ = ["FollowOptions", "FollowSummary", "check_follow", "follow_job", "parse_trigger"]


def __getattr__(name: str) -> Any:
    """``follow_job``, ``check_follow``, ``FollowOptions``, ``parse_trigger`` and
    ``FollowSummary``, imported when first asked for."""
    if name == "FollowSummary":
        from loaders.follow import batches

        return batches.FollowSummary
    if name in ("FollowOptions", "parse_trigger"):
        from loaders.follow import options

        return getattr(options, name)
    if name in __all__:
        from loaders.follow import stream

        return getattr(stream, name)
    raise AttributeError(f"module 'loaders.follow' has no attribute {name!r}")
