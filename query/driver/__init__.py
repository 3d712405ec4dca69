"""Running a query over a store: the runner (shards as Spark tasks or on the driver), the
transport of rows to the driver, and the result (rows, Arrow batches, pandas).

May import: ``query.syntax``, ``query.ops``, ``query.walk``, ``treestore``.
"""
