"""The paged engine: one shard's tree as immutable runs of pages plus a memtable.

Lives here: the page codec (``pages``), where bytes live (``pagestore``), runs and the
page cache (``runs``), tree entries as columns (``entries``), the memtable and the
shard tree itself (``tree``). It knows nothing of loads, queries or job files.

May import: ``treestore.errors``, ``treestore.settings`` and its own modules.
"""
