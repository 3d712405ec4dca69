"""A load's options (:class:`LoadOptions`), one value built once by the command line or
the Python call and passed down; each default is defined here once, and the command
line shows it.

Importing this module imports only :mod:`treestore.store.versions` (for the store's
retention), never Spark.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from treestore.store.versions import DEFAULT_RETENTION

__all__ = ["DEFAULT_MAX_REJECTED", "LoadOptions"]

DEFAULT_MAX_REJECTED = 1000
"""A load with more rejected records than this fails and publishes nothing."""


@dataclass(frozen=True)
class LoadOptions:
    """How one load runs (``treestore load``, :func:`~loaders.load.driver.run_load`)."""

    max_rejected: int = DEFAULT_MAX_REJECTED
    """More rejected records than this fail the load: nothing is published
    (``--max-rejected``)."""

    keep_versions: int = DEFAULT_RETENTION
    """After publishing, versions beyond the newest this many are collected (gc), with
    the files only they use."""

    reprocess_changed: bool = False
    """Read again input files that changed after they were loaded (``--reprocess-changed``);
    otherwise they are skipped and reported."""

    strict: bool = False
    """A field the job reads that some source lacks is an error, not a warning
    (``--strict``; a field in no source is an error unless ``lenient``). The check
    (:func:`~loaders.load.inputs.check_job_fields`) runs before the load, where the
    caller chooses: the command line runs it before Spark starts."""

    lenient: bool = False
    """Fields the job reads that no source has are warnings, and the load reads them as
    missing (``--lenient``)."""

    def updated(self, **given: object) -> LoadOptions:
        """These options with the fields ``given`` as other than None replaced: how a
        call's keyword arguments become one options value."""
        changed = {name: value for name, value in given.items() if value is not None}
        return dataclasses.replace(self, **changed)  # type: ignore[arg-type]
