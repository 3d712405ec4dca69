"""Hydra's filters: one registry, each filter's job-file model and Spark form in one place.

Bundle filters decide whether a record passes (and may set fields); value filters
turn a value into another value or null. Names and options follow Hydra's
(``hydra-filters``); the README's job-format section lists each one.

Lives here: ``kinds`` (the registries, the base classes, the generic parsing and the
compiler to Spark columns), one module per family (``values_text``,
``values_numbers``, ``values_lists``, ``bundles``), and ``catalogue``, which loads
every family and is what the rest of the project imports. Every filter runs as a
Spark SQL expression; none has a Python form today (nothing evaluates a filter
outside Spark).

How to add a value filter: in its family's module, a class with ``name``, ``keys``
(the job-file settings it takes), ``read`` (validate the settings, with defaults)
and ``spark`` (the filter over one text Column), decorated with
``@value_filter``; then a case in ``tests/support/filter_cases.py``. A bundle
filter is a frozen dataclass with ``read``, ``fields`` and ``spark``, decorated
with ``@bundle_filter``. ``tests/loaders/filters/test_filter_registry.py`` checks every
registered filter has each part.

May import: ``loaders.job.text`` (job-file positions); pyspark lazily.
"""
