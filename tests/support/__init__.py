"""What more than one test module needs, in one place: no test module imports another.

Servers and processes the tests start (:mod:`~tests.support.s3_server`,
:mod:`~tests.support.spark_cluster`, :mod:`~tests.support.load_processes`), the JVM class
archive of the run (:mod:`~tests.support.jvm_archive`), shared jobs and cases
(:mod:`~tests.support.jobs`, :mod:`~tests.support.filter_cases`), oracles and scenarios
(:mod:`~tests.support.sweep_oracle`, :mod:`~tests.support.cluster_scenario`,
:mod:`tests.support.reliability`), stores in the forms earlier versions wrote
(:mod:`~tests.support.old_stores`), and the import graph the architecture and layout
tests read (:mod:`~tests.support.import_graph`). Fixtures live in ``tests/conftest.py``.
"""
