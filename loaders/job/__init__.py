"""The job file: the job model, read from the job's text (``loaders.job.text``, the room
below, which keeps every value's place) with its filters validated by their registry.

May import: ``loaders.filters``, ``loaders.job.text``, ``treestore``.
"""
