"""A store on disk: published versions, manifests, the lock, maintenance, dedup index files.

Lives here: the store's layout, every file and folder name it keeps (``layout``), versions,
manifests and publishing (``versions``), the store's lock
(``lock``), gc and check (``maintenance``), the per-shard dedup index files
(``dedup_index``), the check that a load's files are where the driver sees them before
it publishes (``written``).

May import: ``treestore``, ``treestore.native``, ``treestore.storage``.
"""
