"""The console's live figures: execution rate, latency quantiles, infra errors, the pool;
the API's calls by class and their latency; the model usage of the runs on disk."""

from __future__ import annotations

import time
from typing import Any

from sandbox.service.recent import RecentCalls, RecentExecutions, quantile
from sandbox.telemetry.metrics import CALL_CLASSES

RATE_WINDOW_S = 10.0
LATENCY_WINDOW_S = 60.0
CONSOLE_ROUTES = "/ui"  # the console's own calls (its pages, polling, files) are left out


def overview(platform: Any, tenant: str | None) -> dict[str, Any]:
    """Figures of the last seconds (of ``tenant`` when given) and the pool's state now."""
    recent: RecentExecutions | None = getattr(platform, "recent", None)
    latest = recent.window(LATENCY_WINDOW_S, tenant) if recent is not None else []
    now = time.time()
    durations = [r.duration_s for r in latest]
    status = platform.pool_status(tenant) if getattr(platform, "pool", None) is not None else None
    return {
        "time": now,
        "executions_per_s": sum(1 for r in latest if r.time >= now - RATE_WINDOW_S) / RATE_WINDOW_S,
        "executions_recorded": recent.count(tenant) if recent else 0,
        "p50_s": quantile(durations, 0.5),
        "p99_s": quantile(durations, 0.99),
        "infra_errors": sum(1 for r in latest if r.status == "infra_error"),
        "queue_depth": status.waiting if status is not None else 0,
        "groups": [
            {
                "policy": g.policy,
                "image": g.image,
                "idle": g.idle,
                "busy": g.busy,
                "starting": g.starting,
            }
            for g in (status.groups if status is not None else [])
        ],
    }


def call_figures(calls: RecentCalls, tenant: str | None) -> dict[str, Any]:
    """The API calls answered in the last ``LATENCY_WINDOW_S`` (of ``tenant`` when given;
    the console's own left out): how many, how many in each class of
    ``sandbox_calls_total`` and their share (None without calls), latency p50/p99."""
    latest = [
        c for c in calls.window(LATENCY_WINDOW_S, tenant) if not c.route.startswith(CONSOLE_ROUTES)
    ]
    by_class = {kind: sum(1 for c in latest if c.kind == kind) for kind in CALL_CLASSES}
    seconds = [c.seconds for c in latest]
    return {
        "window_s": LATENCY_WINDOW_S,
        "count": len(latest),
        "by_class": by_class,
        "share": {k: n / len(latest) if latest else None for k, n in by_class.items()},
        "p50_s": quantile(seconds, 0.5),
        "p99_s": quantile(seconds, 0.99),
    }


def model_figures(totals: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The runs' model usage (:meth:`RunsUsage.totals`): tokens and cost summed over the
    sources, model calls of the evaluations (training logs count none), and each source's."""
    return {
        "prompt_tokens": sum(t["prompt"] for t in totals.values()),
        "completion_tokens": sum(t["completion"] for t in totals.values()),
        "calls": totals.get("eval", {}).get("calls", 0.0),
        "cost": sum(t["cost"] for t in totals.values()),
        "by_source": totals,
    }
