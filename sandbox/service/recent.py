"""Bounded rings of the service's recent executions, refusals and calls, for the console
(``/ui``).

Only programs run through :meth:`ExecutionService.run` (``POST /v1/run``,
``sandbox run``) are recorded as executions: judged submissions never are, so hidden
tests cannot leak through it. Outputs are kept as short previews. Calls are every HTTP
call answered, in the class ``sandbox_calls_total`` counts it in.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Generic, NamedTuple, Protocol, TypeVar

from pydantic import BaseModel

from sandbox.core.execution import RunRequest
from sandbox.results import ExecResult, ResourceUsage

DEFAULT_CAPACITY = 1000
CALLS_CAPACITY = 10_000
PREVIEW_BYTES = 2048


class _Timed(Protocol):
    @property
    def time(self) -> float: ...

    @property
    def tenant(self) -> str | None: ...


T = TypeVar("T", bound=_Timed)


class _Ring(Generic[T]):
    """The last ``capacity`` records, newest first on reading; thread-safe."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._ring: deque[T] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def _append(self, record: T) -> None:
        with self._lock:
            self._ring.append(record)

    def _snapshot(self) -> list[T]:
        with self._lock:
            return list(reversed(self._ring))

    def count(self, tenant: str | None = None) -> int:
        """How many records the ring holds (of ``tenant``, if given)."""
        with self._lock:
            return sum(1 for r in self._ring if tenant is None or r.tenant == tenant)

    def window(self, seconds: float, tenant: str | None = None) -> list[T]:
        """The records of the last ``seconds`` (of ``tenant``, if given), newest first."""
        since = time.time() - seconds
        return [
            r
            for r in self._snapshot()
            if r.time >= since and (tenant is None or r.tenant == tenant)
        ]


def preview(data: bytes, limit: int = PREVIEW_BYTES) -> str:
    """The first ``limit`` bytes of an output as text (undecodable bytes replaced)."""
    return data[:limit].decode("utf-8", errors="replace")


class ExecutionRecord(BaseModel):
    """One finished execution as the console shows it."""

    id: int
    time: float
    tenant: str
    language: str
    policy: str
    status: str
    exit_code: int | None
    duration_s: float
    usage: ResourceUsage
    stdout_preview: str
    stderr_preview: str
    stdout_truncated: bool
    stderr_truncated: bool


class RecentExecutions(_Ring[ExecutionRecord]):
    """The last ``capacity`` executions, newest first on reading; thread-safe."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        super().__init__(capacity)
        self._ids = itertools.count(1)

    def record(self, request: RunRequest, tenant: str, result: ExecResult, seconds: float) -> None:
        """Keep one finished execution (its outputs cut to previews)."""
        with self._lock:
            self._ring.append(
                ExecutionRecord(
                    id=next(self._ids),
                    time=time.time(),
                    tenant=tenant,
                    language=request.language,
                    policy=request.policy,
                    status=result.status.value,
                    exit_code=result.exit_code,
                    duration_s=round(seconds, 6),
                    usage=result.usage,
                    stdout_preview=preview(result.stdout),
                    stderr_preview=preview(result.stderr),
                    stdout_truncated=len(result.stdout) > PREVIEW_BYTES or result.stdout_truncated,
                    stderr_truncated=len(result.stderr) > PREVIEW_BYTES or result.stderr_truncated,
                )
            )

    def select(
        self,
        *,
        tenant: str | None = None,
        status: str | None = None,
        limit: int = 100,
    ) -> list[ExecutionRecord]:
        """Newest first, filtered by tenant and status."""
        chosen = (
            r
            for r in self._snapshot()
            if (tenant is None or r.tenant == tenant) and (status is None or r.status == status)
        )
        return list(itertools.islice(chosen, limit))

    def get(self, execution_id: int) -> ExecutionRecord | None:
        return next((r for r in self._snapshot() if r.id == execution_id), None)


def quantile(values: Iterable[float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) of ``values``; None when there are none."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))
    return ordered[rank]


class Refusal(BaseModel):
    """A request the service refused for its caller's key: 401, 403 or 429."""

    time: float
    tenant: str | None
    status: int
    code: str
    path: str
    message: str


class Refusals(_Ring[Refusal]):
    """The last ``capacity`` refusals, newest first on reading; thread-safe."""

    def record(self, refusal: Refusal) -> None:
        self._append(refusal)

    def select(self, tenant: str | None = None, limit: int = 50) -> list[Refusal]:
        """Newest first; of ``tenant`` only when given."""
        return [r for r in self._snapshot() if tenant is None or r.tenant == tenant][:limit]


class Call(NamedTuple):
    """One answered HTTP call: when it ended, its route, tenant (once known), class and time."""

    time: float
    route: str
    tenant: str | None
    kind: str
    seconds: float


class RecentCalls(_Ring[Call]):
    """The last ``capacity`` calls answered, newest first on reading; thread-safe."""

    def __init__(self, capacity: int = CALLS_CAPACITY) -> None:
        super().__init__(capacity)

    def record(self, route: str, tenant: str | None, kind: str, seconds: float) -> None:
        self._append(Call(time.time(), route, tenant, kind, seconds))
