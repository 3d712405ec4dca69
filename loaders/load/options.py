"""A load's defaults that the command line shows: importing this module imports nothing else."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_REJECTED"]

DEFAULT_MAX_REJECTED = 1000
"""A load with more rejected records than this fails and publishes nothing."""
