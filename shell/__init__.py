"""User-facing front ends: the ``treestore`` command line (and, later, the REPL)."""

__all__: list[str] = []
