"""The job file: its text (JSON/TOML with positions), the job model and the filter model.

May import: ``treestore`` (errors, sharding) and its own modules.
"""
