"""Walking one shard's tree with a parsed path: the row walker, the column engine, node names.

May import: ``query.syntax``, ``query.ops``, ``query.ops.base``, ``treestore``,
``treestore.storage``, ``treestore.store``.
"""
