"""Walking one shard's tree with a parsed path: the row walker, the column engine, node names.

May import: ``query.syntax``, ``query.ops``, ``treestore`` (its storage, store and
attachments).
"""
