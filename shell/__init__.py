"""User-facing front ends: the ``treestore`` command line and the interactive shell.

Lives here: ``entry`` (the command's entry point: Ctrl-C at any moment is exit status
130), ``cli`` (argparse and dispatch only), ``commands`` (the work of each
command), ``demo``, ``progress_view`` (the view of load events); the interactive shell
is in ``shell.repl``, the HTTP service (``treestore serve``) in ``shell.serve``, and the
output formats and the store summary both use are in
``shell.output``.

May import: ``shell.output``, ``shell.repl``, ``shell.serve``, ``query.driver``, ``loaders``,
``loaders.load``, ``loaders.follow``, ``loaders.sweep``, ``treestore``,
``treestore.storage``, ``treestore.store``. Nothing imports ``shell``.
"""

__all__: list[str] = []
