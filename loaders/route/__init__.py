"""A load's records on their way to the shards: the columns every mapped record carries,
the Arrow map (a load's reading tasks map their records on Arrow arrays) and the pieces
(each file's records for each shard, written by the task that read it, read back by the
shard's task in record order).

May import: ``loaders.filters``, ``loaders.formats``, ``loaders.job``, ``loaders.listing``,
``loaders.tree``, ``treestore``, ``treestore.native``, ``treestore.storage``,
``treestore.store``.
"""
