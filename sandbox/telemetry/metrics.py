"""Prometheus metrics of the service: executions, latency, pool sizes, queue depth."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

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
