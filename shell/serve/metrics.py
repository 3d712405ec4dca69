"""The service's Prometheus metrics, in a registry of its own (``GET /metrics``): queries
by outcome, their latency, rows and bytes sent, cache hits, Spark jobs running."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["ServeMetrics"]

LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 300)


class ServeMetrics:
    """The metrics of one service (a registry per app: tests build several apps)."""

    def __init__(self, spark_jobs_running: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        self.queries = Counter(
            "treestore_queries",
            "Queries answered, by outcome (ok, cached, not_modified, bad_request, "
            "not_found, busy, timeout, cancelled, failed).",
            ["outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "treestore_query_seconds",
            "Seconds from a query's request to its last byte.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.rows_sent = Counter(
            "treestore_rows_sent", "Rows sent in query answers.", registry=self.registry
        )
        self.bytes_sent = Counter(
            "treestore_bytes_sent", "Bytes of query answers sent.", registry=self.registry
        )
        self.cache_hits = Counter(
            "treestore_cache_hits", "Queries answered from the result cache.",
            registry=self.registry,
        )  # fmt: skip
        self.running = Gauge(
            "treestore_queries_running", "Queries running now.", registry=self.registry
        )
        self.spark_jobs = Gauge(
            "treestore_spark_jobs_running",
            "Spark jobs running now in the service's SparkSession.",
            registry=self.registry,
        )
        self.spark_jobs.set_function(lambda: float(spark_jobs_running()))

    def text(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)
