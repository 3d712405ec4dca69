"""One incremental load: inputs and readers, filters as Spark columns, sharding of frames,
the dedup step, the load driver and its per-shard task, the report and progress.

May import: ``loaders.job``, ``loaders.job.text``, ``loaders.filters``, ``loaders.formats``,
``loaders.listing``, ``loaders.route``, ``loaders.tree``, ``treestore``, ``treestore.storage``,
``treestore.store``.
"""
