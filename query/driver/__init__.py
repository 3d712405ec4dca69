"""Running a query over a store: its plan (``plan``: where it runs and why), the runner
(shards as Spark tasks or on the driver), the transport of rows to the driver, and the
result (rows, Arrow batches, pandas, Parquet files: ``parquet_out``).

May import: ``query.syntax``, ``query.ops``, ``query.ops.base``, ``query.walk``,
``treestore``, ``treestore.storage``, ``treestore.store``.
"""
