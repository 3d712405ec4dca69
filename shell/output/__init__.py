"""What the front ends write: rows in an output format, and a store's summary.

Lives here: ``formats`` (tsv, csv, json, jsonl and an aligned table) and ``info`` (the
text of ``treestore info`` and the shell's ``\\info``). Both the command line's
commands (``shell``) and the interactive shell (``shell.repl``) write through them, so
they sit in a room below both; ``shell.repl`` is imported only by ``shell`` and by the
service's catalog (``shell.serve``, which completes as the shell does).

May import: ``loaders.tree``, ``query.ops``, ``treestore``, ``treestore.storage``,
``treestore.store``.
"""
