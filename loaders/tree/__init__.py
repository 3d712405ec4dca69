"""Applying records to a shard's tree: the tree builder and pending update-only records.

May import: ``loaders.job``, ``treestore``.
"""
