"""treestore's top-level packages (``query``, ``loaders``, ``shell``), found where it is.

Python imports the first ``query`` it finds on ``sys.path``, and the folder of the
script being run comes first: a user's own ``query.py`` (or ``shell.py``, or a folder
of that name) next to their script would hide treestore's package and fail deep inside
an import, naming neither file. The entry points that need a sibling package ask
:func:`require_own_packages` first, which names the file in the way and what to do.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from treestore.errors import ShadowedPackageError

__all__ = ["SIBLINGS", "require_own_packages", "shadowing_file"]

SIBLINGS = ("query", "loaders", "shell")
"""The top-level packages installed beside ``treestore``."""

_HOME = Path(__file__).resolve().parent.parent
"""The folder that holds ``treestore`` and its sibling packages."""


def shadowing_file(name: str) -> Path | None:
    """The file or folder Python takes for package ``name`` when it is not treestore's
    own (a user's ``query.py``), else ``None`` (treestore's own, or none at all)."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        origin = getattr(loaded, "__file__", None)
    else:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        origin = spec.origin if spec is not None else None
    if origin is None:
        return None
    found = Path(origin).resolve()
    own = _HOME / name / "__init__.py"
    if found == own:
        return None
    return found.parent if found.name == "__init__.py" else found


def require_own_packages(*names: str) -> None:
    """Raise :class:`~treestore.errors.ShadowedPackageError` naming the file when one of
    ``names`` (default: every sibling) would be imported from somewhere else."""
    for name in names or SIBLINGS:
        found = shadowing_file(name)
        if found is not None:
            raise ShadowedPackageError(
                f"{found} hides treestore's {name!r} package (Python imports the first "
                f"{name!r} it finds, and the script's own folder comes first). Rename that "
                f"file or folder, or run from another folder."
            )
