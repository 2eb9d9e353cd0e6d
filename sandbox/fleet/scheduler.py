"""Admission and ordering of work over the fleet's execution slots (:class:`Scheduler`).

The router sets how many slots the fleet has (:meth:`Scheduler.set_capacity`); each
execution holds one (``async with scheduler.slot(tenant, klass)``). When none is free the
request waits, and the next free slot goes to:

* the class with the highest *effective* priority: its weight, raised for the class's
  oldest waiter in proportion to how long it has waited, so that it reaches the top class's
  weight after the class's ``max_wait_s`` and passes it afterwards (ageing: no class
  starves behind a flood of higher work; ties go to the older waiter);
* within that class, the tenant with the lowest start tag of start-time fair queuing
  (each grant advances the tenant's tag by ``1 / weight``), so that under contention
  tenants' grants follow their weights; a tenant that was idle starts at the class's
  virtual time, banking no credit;
* never to a tenant already running its fleet-wide ``max_concurrent`` executions (its
  waiters stay queued while other tenants' go first).

Past the queue bound a request is refused with :class:`~sandbox.errors.CapacityError`
whose ``retry_after`` is the queue length over the measured drain rate (completions per
second over the last ``queue.drain_window_s``), clamped to
[:data:`MIN_RETRY_AFTER_S`, :data:`MAX_RETRY_AFTER_S`].

A waiter cancelled while queued leaves no trace (its tenant's tag is not charged); a
slot is released exactly once, also when the holder raises or is cancelled.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final

from sandbox.errors import CapacityError, InvalidRequestError

from .config import FleetConfig

MIN_RETRY_AFTER_S: Final = 1.0
MAX_RETRY_AFTER_S: Final = 300.0


@dataclass(eq=False, slots=True)
class _Waiter:
    tenant: str
    klass: str
    enqueued: float
    future: asyncio.Future[None]


@dataclass(slots=True)
class _Backlog:
    """One tenant's waiters in one class, and the start tag of the first."""

    tag: float
    waiters: deque[_Waiter] = field(default_factory=deque)


@dataclass(slots=True)
class _Class:
    weight: int
    max_wait_s: float
    vtime: float = 0.0
    length: int = 0
    backlogs: dict[str, _Backlog] = field(default_factory=dict)
    finish: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    """What metrics and ``fleet status`` show of the scheduler."""

    capacity: int
    busy: int
    queued: dict[str, int]
    running: dict[str, int]
    served: dict[str, int]
    rejected: int
    drain_per_s: float


class Scheduler:
    """Fleet-wide admission: classes with ageing, weighted fair share, tenant quotas."""

    def __init__(self, config: FleetConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._clock = clock
        self._top = max(c.weight for c in config.classes.values())
        self._classes = {
            name: _Class(weight=c.weight, max_wait_s=c.max_wait_s)
            for name, c in config.classes.items()
        }
        self._capacity = 0
        self._busy = 0
        self._waiting = 0
        self._running: dict[str, int] = {}
        self._served: dict[str, int] = {}
        self._rejected = 0
        self._completions: deque[float] = deque()
        self._started = clock()

    def set_capacity(self, slots: int) -> None:
        """The number of executions the fleet can run at once (the router keeps it current)."""
        if slots < 0:
            raise ValueError(f"capacity must be at least 0, got {slots}")
        self._capacity = slots
        self._dispatch()

    @property
    def waiting(self) -> int:
        """Requests queued for a slot."""
        return self._waiting

    @asynccontextmanager
    async def slot(self, tenant: str, klass: str) -> AsyncIterator[float]:
        """Hold one execution slot; yields the seconds the request waited for it.

        Raises :class:`~sandbox.errors.CapacityError` when the queue is full and
        :class:`~sandbox.errors.InvalidRequestError` for a class the config does not know.
        """
        waited = await self._acquire(tenant, klass)
        try:
            yield waited
        finally:
            self._release(tenant)

    def drain_rate(self) -> float:
        """Completions per second over the last ``queue.drain_window_s`` (0 if none)."""
        now = self._clock()
        window = self._config.queue.drain_window_s
        self._forget_completions(now - window)
        span = min(window, now - self._started)
        if not self._completions or span <= 0:
            return 0.0
        return len(self._completions) / span

    def retry_after(self) -> float:
        """Seconds until the queue has drained at the measured rate, clamped."""
        rate = self.drain_rate()
        if rate <= 0:
            return MAX_RETRY_AFTER_S
        return min(MAX_RETRY_AFTER_S, max(MIN_RETRY_AFTER_S, self._waiting / rate))

    def stats(self) -> SchedulerStats:
        """A snapshot of the counters."""
        return SchedulerStats(
            capacity=self._capacity,
            busy=self._busy,
            queued={name: c.length for name, c in self._classes.items()},
            running={t: n for t, n in self._running.items() if n},
            served=dict(self._served),
            rejected=self._rejected,
            drain_per_s=self.drain_rate(),
        )

    # ------------------------------------------------------------------ internals

    def _acquire_now(self, tenant: str) -> bool:
        return self._busy < self._capacity and self._under_quota(tenant)

    def _under_quota(self, tenant: str) -> bool:
        return self._running.get(tenant, 0) < self._config.max_concurrent(tenant)

    async def _acquire(self, tenant: str, klass: str) -> float:
        queue = self._classes.get(klass)
        if queue is None:
            raise InvalidRequestError(
                f"priority_class: unknown class {klass!r}; use one of {', '.join(self._classes)}"
            )
        # Every state change dispatches, so a free slot means no queued waiter may take it.
        if self._acquire_now(tenant):
            self._grant(tenant)
            return 0.0
        if self._waiting >= self._config.queue.max_waiting:
            self._rejected += 1
            raise CapacityError(
                f"the fleet's queue is full ({self._waiting} requests waiting); retry later",
                retry_after=self.retry_after(),
            )
        now = self._clock()
        waiter = _Waiter(tenant, klass, now, asyncio.get_running_loop().create_future())
        self._enqueue(queue, waiter)
        try:
            await waiter.future
        except BaseException:
            if waiter.future.cancelled() or not waiter.future.done():
                self._remove(queue, waiter)
            else:  # granted, then cancelled before it could resume: undo the grant
                self._release(tenant, completed=False)
            raise
        return self._clock() - now

    def _enqueue(self, queue: _Class, waiter: _Waiter) -> None:
        backlog = queue.backlogs.get(waiter.tenant)
        if backlog is None:
            start = max(queue.vtime, queue.finish.get(waiter.tenant, 0.0))
            backlog = queue.backlogs[waiter.tenant] = _Backlog(tag=start)
        backlog.waiters.append(waiter)
        queue.length += 1
        self._waiting += 1

    def _remove(self, queue: _Class, waiter: _Waiter) -> None:
        backlog = queue.backlogs.get(waiter.tenant)
        if backlog is None or waiter not in backlog.waiters:
            return
        backlog.waiters.remove(waiter)
        queue.length -= 1
        self._waiting -= 1
        if not backlog.waiters:
            del queue.backlogs[waiter.tenant]

    def _grant(self, tenant: str) -> None:
        self._busy += 1
        self._running[tenant] = self._running.get(tenant, 0) + 1
        self._served[tenant] = self._served.get(tenant, 0) + 1

    def _release(self, tenant: str, *, completed: bool = True) -> None:
        self._busy -= 1
        left = self._running[tenant] - 1
        if left:
            self._running[tenant] = left
        else:
            del self._running[tenant]
        if completed:
            self._completions.append(self._clock())
        elif self._served[tenant] > 1:
            self._served[tenant] -= 1
        else:
            del self._served[tenant]
        self._dispatch()

    def _forget_completions(self, before: float) -> None:
        completions = self._completions
        while completions and completions[0] < before:
            completions.popleft()

    def _dispatch(self) -> None:
        """Hand free slots to the waiters that come next."""
        while self._busy < self._capacity and self._waiting:
            chosen = self._next()
            if chosen is None:
                return  # every waiter's tenant is at its quota
            queue, tenant, backlog = chosen
            if backlog.waiters[0].future.done():  # cancelled; its task has not yet withdrawn it
                self._remove(queue, backlog.waiters[0])
                continue
            waiter = backlog.waiters.popleft()
            queue.length -= 1
            self._waiting -= 1
            queue.vtime = backlog.tag
            finish = backlog.tag + 1.0 / self._config.settings_for(tenant).weight
            queue.finish[tenant] = finish
            if backlog.waiters:
                backlog.tag = finish
            else:
                del queue.backlogs[tenant]
            self._grant(tenant)
            waiter.future.set_result(None)

    def _next(self) -> tuple[_Class, str, _Backlog] | None:
        """The class with the highest effective priority, and its fair-share tenant."""
        now = self._clock()
        best: tuple[float, float] | None = None
        chosen: tuple[_Class, str, _Backlog] | None = None
        for queue in self._classes.values():
            if not queue.length:
                continue
            pick: tuple[str, _Backlog] | None = None
            oldest = now
            for tenant, backlog in queue.backlogs.items():
                if not self._under_quota(tenant):
                    continue
                oldest = min(oldest, backlog.waiters[0].enqueued)
                if pick is None or (backlog.tag, backlog.waiters[0].enqueued) < (
                    pick[1].tag,
                    pick[1].waiters[0].enqueued,
                ):
                    pick = (tenant, backlog)
            if pick is None:
                continue
            ageing = (self._top - queue.weight) * (now - oldest) / queue.max_wait_s
            key = (queue.weight + ageing, -oldest)
            if best is None or key > best:
                best, chosen = key, (queue, *pick)
        return chosen
