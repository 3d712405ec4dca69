"""The reliability runs' parts: a prepared scenario, SIGKILL rounds and races, disk-full
trials and the parsers' fuzzing, shared by ``tests/reliability``'s tests and its scripts
(``python -m tests.reliability.table``, ``python -m tests.reliability.fuzz``)."""
