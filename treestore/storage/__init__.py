"""The paged engine: one shard's tree as immutable runs of pages plus a memtable.

Lives here: the page codec (``pages``), where bytes live (``pagestore``), runs and the
page cache (``runs``), tree entries as columns (``entries``), the runs' key filters
(``keyfilter``), the memtable and its key index (``memtable``), and the
shard tree: reading it (``reading``), visiting it
(``visits``), when its runs merge (``compaction``), what a version records of it,
side files included (``state``), and flush and commit (``tree``). It knows nothing
of loads, queries or job files, nor a store's file names (its callers give them).

May import: ``treestore`` (its errors, settings, arrays, failpoints and filesystems),
``treestore.native``.
"""
