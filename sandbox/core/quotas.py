"""What one tenant may hold at once; ``None`` is no limit.

The service fills these in from its API keys (``sandbox/service/tenants.py``); the
pool (sandboxes held), the sessions, the snapshot store and the task catalog enforce
them. Library
callers without keys pass nothing: no tenant limits, the pool's bounds only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class TenantQuotas:
    """A tenant's limits: sandboxes held, sessions open, snapshots and task uploads kept."""

    max_concurrency: int | None = None  # sandboxes held: runs, judged items, sessions
    max_sessions: int | None = None
    max_snapshots: int | None = None
    max_snapshot_bytes: int | None = None
    max_task_uploads: int | None = None  # uploaded task directories kept (POST /v1/tasks)
    max_task_upload_bytes: int | None = None
    max_environments: int | None = None  # built task environments it may use


UNLIMITED = TenantQuotas()
QuotaLookup = Callable[[str], TenantQuotas]


def unlimited(_tenant: str) -> TenantQuotas:
    """The lookup for callers without keys: no tenant has a limit."""
    return UNLIMITED
