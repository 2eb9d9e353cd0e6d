"""The console's live figures: execution rate, latency quantiles, infra errors, the pool."""

from __future__ import annotations

import time
from typing import Any

from sandbox.service.recent import RecentExecutions, quantile

RATE_WINDOW_S = 10.0
LATENCY_WINDOW_S = 60.0


def overview(platform: Any, tenant: str | None) -> dict[str, Any]:
    """Figures of the last seconds (of ``tenant`` when given) and the pool's state now."""
    recent: RecentExecutions | None = getattr(platform, "recent", None)
    latest = recent.window(LATENCY_WINDOW_S, tenant) if recent is not None else []
    now = time.time()
    durations = [r.duration_s for r in latest]
    pool = getattr(platform, "pool", None)
    status = pool.status() if pool is not None else None
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
