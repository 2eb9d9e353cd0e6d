"""Prometheus metrics of the service: executions, latency, pool sizes, queue depth."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

REGISTRY = CollectorRegistry()

EXECUTIONS = Counter(
    "sandbox_executions_total",
    "Executions finished, by language, policy and status.",
    ["language", "policy", "status"],
    registry=REGISTRY,
)
INFRA_ERRORS = Counter(
    "sandbox_infra_errors_total",
    "Executions lost to infrastructure failures (never scored as wrong answers).",
    ["policy"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "sandbox_execution_seconds",
    "Time from lease request to result, by language.",
    ["language"],
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)
POOL_CONTAINERS = Gauge(
    "sandbox_pool_containers",
    "Containers in the pool, by policy, image and state.",
    ["policy", "image", "state"],
    registry=REGISTRY,
)
QUEUE_DEPTH = Gauge(
    "sandbox_pool_waiting", "Requests waiting for a free sandbox.", registry=REGISTRY
)
REJECTED = Counter(
    "sandbox_rejected_total", "Requests refused because the pool was saturated.", registry=REGISTRY
)


def record_execution(language: str, policy: str, status: str, seconds: float) -> None:
    """Count one finished execution and observe its latency."""
    EXECUTIONS.labels(language, policy, status).inc()
    LATENCY.labels(language).observe(seconds)
    if status == "infra_error":
        INFRA_ERRORS.labels(policy).inc()


JUDGEMENTS = Counter(
    "sandbox_judgements_total",
    "Submissions judged, by language, policy and error class (none when every test passed).",
    ["language", "policy", "error_class"],
    registry=REGISTRY,
)


def record_judgement(language: str, policy: str, error_class: str | None) -> None:
    """Count one judged submission; infrastructure failures are counted apart."""
    JUDGEMENTS.labels(language, policy, error_class or "none").inc()
    if error_class == "infra":
        INFRA_ERRORS.labels(policy).inc()


def exposition() -> bytes:
    """The registry in Prometheus text format."""
    return generate_latest(REGISTRY)


def observe_pool(groups: list[tuple[str, str, dict[str, int]]], waiting: int) -> None:
    """Set the pool gauges from ``(policy, image, {state: count})`` snapshots."""
    POOL_CONTAINERS.clear()
    for policy, image, states in groups:
        for state, count in states.items():
            POOL_CONTAINERS.labels(policy, image, state).set(count)
    QUEUE_DEPTH.set(waiting)


class _Families:
    """A collector that yields fixed metric families (what :func:`merge` parsed)."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self._families


def merge(own: bytes, labelled: Mapping[str, bytes], *, label: str = "host") -> bytes:
    """One exposition of ``own`` and of each ``labelled`` text, whose samples get ``label``.

    ``labelled`` maps a label value (a host's name) to that source's Prometheus text.
    Families of the same name are merged into one (one HELP and TYPE), their samples
    kept apart by the label.
    """
    families: dict[str, Metric] = {}

    def add(text: bytes, extra: dict[str, str]) -> None:
        for family in text_string_to_metric_families(text.decode()):
            into = families.get(family.name)
            if into is None:
                into = Metric(family.name, family.documentation, family.type, family.unit)
                families[family.name] = into
            into.samples.extend(s._replace(labels={**s.labels, **extra}) for s in family.samples)

    add(own, {})
    for value, text in labelled.items():
        add(text, {label: value})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families.values()))
    return generate_latest(registry)
