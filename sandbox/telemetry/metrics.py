"""Prometheus metrics of the service: calls by class, executions, latency, pool sizes, queue
depth, audit chain.

The alert rules and the dashboard in ``deploy/`` use these names; a test checks that
every name they use is in ``/metrics``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
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
QUEUE_MAX = Gauge(
    "sandbox_pool_max_waiting",
    "Requests that may wait for a free sandbox; one more is refused (429).",
    registry=REGISTRY,
)
REJECTED = Counter(
    "sandbox_rejected_total", "Requests refused because the pool was saturated.", registry=REGISTRY
)


def declare_policies(names: Iterable[str]) -> None:
    """Start each policy's error counter at 0: its series exists before its first error
    (a dashboard shows 0, not no data; ``rate`` sees the first increase)."""
    for name in names:
        INFRA_ERRORS.labels(name)


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


CALL_CLASSES = ("ok", "user", "infra", "refused")
CALLS = Counter(
    "sandbox_calls_total",
    "API calls answered, by route and class: ok, user (the user's code failed), infra "
    "(the platform failed) or refused (a 4xx: bad request, auth, quota, capacity).",
    ["route", "class"],
    registry=REGISTRY,
)
CALL_LATENCY = Histogram(
    "sandbox_call_seconds",
    "Time from request to response, by route.",
    ["route"],
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)


MODEL_CALLS = Counter(
    "sandbox_model_calls_total",
    "Calls to a model, by source (eval: an agent evaluation's model).",
    ["source"],
    registry=REGISTRY,
)
MODEL_TOKENS = Counter(
    "sandbox_model_tokens_total",
    "Tokens a model spent, by source and kind (prompt, completion).",
    ["source", "kind"],
    registry=REGISTRY,
)
MODEL_COST = Counter(
    "sandbox_model_cost_total",
    "What those tokens cost at the configured prices per 1,000 tokens (0 unless priced).",
    ["source"],
    registry=REGISTRY,
)


def record_model_call(source: str, prompt_tokens: int, completion_tokens: int, cost: float) -> None:
    """Count one model call: its tokens and their cost."""
    MODEL_CALLS.labels(source).inc()
    MODEL_TOKENS.labels(source, "prompt").inc(prompt_tokens)
    MODEL_TOKENS.labels(source, "completion").inc(completion_tokens)
    MODEL_COST.labels(source).inc(cost)


def record_call(route: str, kind: str, seconds: float) -> None:
    """Count one answered API call in its class and observe its latency."""
    CALLS.labels(route, kind).inc()
    CALL_LATENCY.labels(route).observe(seconds)


def exposition() -> bytes:
    """The registry in Prometheus text format."""
    return generate_latest(REGISTRY)


class _Families:
    """A collector that yields given metric families (what :func:`merge` parsed, or the
    last snapshot of counts kept elsewhere)."""

    def __init__(self, families: Iterable[Metric] = ()) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self.families


_POOL_COUNTS = _Families()
_AUDIT_CHAIN = _Families()
REGISTRY.register(_POOL_COUNTS)
REGISTRY.register(_AUDIT_CHAIN)


def observe_pool(
    groups: list[tuple[str, str, dict[str, int], int]], waiting: int, max_waiting: int
) -> None:
    """Set the pool's metrics from ``(policy, image, {state: count}, start failures)``
    snapshots, the requests waiting and their bound."""
    POOL_CONTAINERS.clear()
    failures = CounterMetricFamily(
        "sandbox_pool_start_failures",
        "Sandboxes the pool could not create or start, by policy and image.",
        labels=["policy", "image"],
    )
    # Groups whose labels are alike (built environments, shown without their ids) add up.
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    failed_by: dict[tuple[str, str], int] = defaultdict(int)
    for policy, image, states, failed in groups:
        for state, count in states.items():
            counts[policy, image, state] += count
        failed_by[policy, image] += failed
    for labels, count in counts.items():
        POOL_CONTAINERS.labels(*labels).set(count)
    for pair, failed in failed_by.items():
        failures.add_metric(list(pair), failed)
    _POOL_COUNTS.families = [failures]
    QUEUE_DEPTH.set(waiting)
    QUEUE_MAX.set(max_waiting)


def observe_audit(intact: bool, records: int, at: float) -> None:
    """Publish one walk of the audit log's hash chain: intact or not, records checked, when.

    Until the first walk these metrics are absent (not 0, which would read as broken).
    """
    _AUDIT_CHAIN.families = [
        GaugeMetricFamily(
            "sandbox_audit_chain_ok",
            "1 if the audit log's hash chain was intact when last walked, else 0.",
            value=float(intact),
        ),
        GaugeMetricFamily(
            "sandbox_audit_chain_records", "Records checked by the last walk.", value=records
        ),
        GaugeMetricFamily(
            "sandbox_audit_chain_verified_timestamp_seconds",
            "Unix time of the last walk of the audit chain.",
            value=at,
        ),
    ]


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
