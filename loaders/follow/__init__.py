"""Continuous loads (``treestore load --follow``): Spark's file stream over the job's
sources (``stream``), each micro-batch one load publishing one version (``batches``).

May import: ``loaders.job``, ``loaders.load``, ``treestore``.
"""

from __future__ import annotations

from loaders.follow.batches import FollowSummary
from loaders.follow.stream import follow_job, parse_trigger

__all__ = ["FollowSummary", "follow_job", "parse_trigger"]
