"""``python -m treestore``: the same as the ``treestore`` command."""

from shell.entry import run

run()
