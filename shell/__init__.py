"""User-facing front ends: the ``treestore`` command line and the interactive shell.

Lives here: ``entry`` (the command's entry point: Ctrl-C at any moment is exit status
130), ``cli`` (argparse and dispatch only), ``commands`` (the work of each
command), ``demo``, ``info`` (the store summary), ``formats`` (tsv, csv, json, table);
the interactive shell is in ``shell.repl``.

May import: ``query``, ``loaders`` and ``treestore``; nothing imports ``shell``.
"""

__all__: list[str] = []
