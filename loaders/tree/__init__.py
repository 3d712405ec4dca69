"""Applying records to a shard's tree: the tree builder, pending update-only records, and
one shard's load phase by phase.

Lives here: the builder (``builder``: Hydra's element semantics over Arrow batches, and
the retry of kept records), pending records (``pending``: their life in a load, kept,
expired, stored as the shard's ``pending`` side files, counted; their watermark), a
shard's load (``shard_load``: records source by source, then pending records retried,
stored and committed).

May import: ``loaders.job``, ``treestore``, ``treestore.native``, ``treestore.storage``,
``treestore.store``.
"""
