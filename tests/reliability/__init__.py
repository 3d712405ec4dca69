"""Reliability: kill rounds, disk full, fuzzing, corruption and bad inputs; the fault matrix
(``python -m tests.reliability.table``) that docs/reliability.md shows."""
