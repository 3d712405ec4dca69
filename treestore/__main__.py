"""``python -m treestore``: the same as the ``treestore`` command."""

from shell.cli import main

raise SystemExit(main())
