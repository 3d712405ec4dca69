"""``treestore serve``: the stores as an HTTP query service (see ``docs/serve.md``).

Lives here: ``catalog`` (what the browse and help calls answer, as plain JSON-ready
documents: the stores, one store's summary, a node's children across the shards, the
shell's completions, the op catalogue; pure functions, no HTTP).

May import: ``shell.output``, ``shell.repl``, ``query.driver``, ``query.ops``,
``treestore``, ``treestore.storage``.
"""

__all__: list[str] = []
