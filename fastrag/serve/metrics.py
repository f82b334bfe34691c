"""``GET /metrics``: Prometheus text format, over every worker process.

Counters and histograms of :mod:`prometheus_client`: requests and errors by
endpoint, request latency by endpoint, questions retrieved for, answers
found and not found, answers citing a retrieved chunk, snapshot switches;
and ``fastrag_hit_rate``, the share of answers that cite a retrieved chunk
(the operational hit rate), derived from those counters at each scrape.
With several workers, ``fastrag serve`` sets ``PROMETHEUS_MULTIPROC_DIR``
before the workers start, so that any worker's ``/metrics`` reports the sum
over all of them (prometheus_client's multiprocess mode).
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class Metrics:
    """The server's metrics (one instance per application)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "fastrag_requests",
            "HTTP requests by endpoint and status",
            ["endpoint", "status"],
            registry=r,
        )
        self.errors = Counter(
            "fastrag_errors",
            "Error answers by endpoint and error type",
            ["endpoint", "type"],
            registry=r,
        )
        self.latency = Histogram(
            "fastrag_request_seconds", "Request latency by endpoint", ["endpoint"],
            buckets=_BUCKETS, registry=r,
        )  # fmt: skip
        self.retrievals = Counter(
            "fastrag_retrievals", "Questions retrieved for, by knowledge base", ["kb"], registry=r
        )
        self.answers = Counter(
            "fastrag_answers", "Answers by knowledge base and whether they were found",
            ["kb", "found"], registry=r,
        )  # fmt: skip
        self.citing = Counter(
            "fastrag_answers_citing", "Answers citing a retrieved chunk, by knowledge base", ["kb"],
            registry=r,
        )  # fmt: skip
        self.switches = Counter(
            "fastrag_snapshot_switches", "Switches to a newly saved snapshot", ["kb"], registry=r
        )

        # The labelled children, looked up once: ``labels()`` takes a lock and
        # builds a key on every call; the children themselves are the same objects.
        self._served: dict[tuple[str, int], tuple[Any, Any]] = {}
        self._retrieved: dict[str, Any] = {}

    def served(self, endpoint: str, status: int, seconds: float) -> None:
        """Count one request of ``endpoint`` answered with ``status`` after ``seconds``."""
        children = self._served.get((endpoint, status))
        if children is None:
            children = (self.requests.labels(endpoint, str(status)), self.latency.labels(endpoint))
            self._served[endpoint, status] = children
        children[0].inc()
        children[1].observe(seconds)

    def retrieved(self, kb: str, questions: int) -> None:
        """Count ``questions`` retrieved for in ``kb``."""
        child = self._retrieved.get(kb)
        if child is None:
            child = self._retrieved[kb] = self.retrievals.labels(kb)
        child.inc(questions)

    def answered(self, kb: str, found: bool, citing: bool) -> None:
        """Count one answer."""
        self.answers.labels(kb, "true" if found else "false").inc()
        if citing:
            self.citing.labels(kb).inc()

    def render(self) -> bytes:
        """Every metric in the Prometheus text format (summed over workers in multiprocess mode)."""
        path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if path:
            registry = CollectorRegistry()
            MultiProcessCollector(registry, path)
        else:
            registry = self.registry
        answers: dict[str, float] = defaultdict(float)
        citing: dict[str, float] = defaultdict(float)
        for family in registry.collect():
            for sample in family.samples:
                if sample.name == "fastrag_answers_total":
                    answers[sample.labels["kb"]] += sample.value
                elif sample.name == "fastrag_answers_citing_total":
                    citing[sample.labels["kb"]] += sample.value
        lines = [
            "# HELP fastrag_hit_rate Share of answers citing a retrieved chunk, by knowledge base",
            "# TYPE fastrag_hit_rate gauge",
        ]
        for kb, n in sorted(answers.items()):
            lines.append(f'fastrag_hit_rate{{kb="{kb}"}} {citing[kb] / n if n else 0.0}')
        return generate_latest(registry) + ("\n".join(lines) + "\n").encode()
