"""The warm pool: pre-started sandboxes per (image, policy), leased one tenant at a time.

- Each group (image, policy) keeps ``policy.pool.warm`` unbound sandboxes ready
  and never holds more than ``policy.pool.max``; refills run in the background
  with a bounded number of containers starting at once.
- A sandbox is bound to the tenant of its first lease and never serves another.
- A tenant holds at most its ``max_concurrency`` sandboxes at once, across every
  group and every kind of lease (runs, judged items, sessions, starting ones
  included); one more is :class:`~sandbox.errors.QuotaError` at once, never a wait.
- After every lease it is reset and the reset verified before it is idle again;
  a failed reset, a dead runner, an execution the runner had to kill, an
  infrastructure error or ``max_uses`` retires it, and a replacement is warmed.
- When every sandbox is busy, leases wait in a bounded queue; past the bound,
  or past the lease timeout, :class:`~sandbox.errors.CapacityError` tells the
  caller when to retry.
- :meth:`Pool.retire_policies` (a policy reload) retires the groups of old policy
  versions: their idle sandboxes go at once, leased ones when their lease ends (never
  reset and reused), and such a group is neither refilled nor listed once empty.
- A :class:`RefillHook` (a fleet host's elastic sizing) is told how long each
  sandbox took to create and may hold warm refills back; without one (the
  single host) refills start as soon as a start slot is free.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, Field

from sandbox.backends.base import Backend, Sandbox
from sandbox.core.quotas import QuotaLookup, unlimited
from sandbox.errors import (
    CapacityError,
    InfrastructureError,
    InvalidRequestError,
    LimitError,
    NotFoundError,
    QuotaError,
    SandboxError,
)
from sandbox.policy import Policy, PolicyVersion
from sandbox.telemetry import tracing

logger = logging.getLogger(__name__)

DEFAULT_MAX_WAITERS = 512
DEFAULT_START_CONCURRENCY = 2
DEFAULT_LEASE_TIMEOUT_S = 60.0
DEFAULT_HEALTH_INTERVAL_S = 10.0
# A sandbox bound to one tenant is given back to the pool (retired) after this idle time.
BOUND_IDLE_TTL_S = 300.0
REFILL_BACKOFF_S = 2.0
# Errors about the request itself, raised after a clean answer from the runner.
_REQUEST_ERRORS = (InvalidRequestError, LimitError, NotFoundError)


class RefillHook(Protocol):
    """What a pool tells an elastic sizer, and asks it before each warm refill."""

    def started(self, policy: str, seconds: float) -> None:
        """A sandbox of ``policy`` took ``seconds`` to create and start."""

    def may_refill(self, policy: str, busy: int, starting: int) -> bool:
        """Whether to start one more warm sandbox of ``policy`` now, with ``busy``
        sandboxes leased in the whole pool and ``starting`` of the group starting."""


@dataclass(eq=False)
class _Slot:
    sandbox: Sandbox
    tenant: str | None = None
    uses: int = 0
    idle_since: float = field(default_factory=time.monotonic)


class Lease:
    """A sandbox held by one caller; call :meth:`retire` if it must not be reused."""

    def __init__(self, slot: _Slot, group: _Group) -> None:
        self._slot = slot
        self.group = group
        self.retire_reason: str | None = None
        self.returned = False

    @property
    def sandbox(self) -> Sandbox:
        return self._slot.sandbox

    def retire(self, reason: str) -> None:
        """Destroy the sandbox after this lease instead of resetting it."""
        self.retire_reason = self.retire_reason or reason


class GroupStatus(BaseModel):
    """Counts for one (image, policy) group."""

    policy: str
    image: str
    digest: str = ""
    retiring: bool = False
    warm_target: int
    max: int
    idle: int
    idle_bound: int
    busy: int
    starting: int
    resetting: int
    waiting: int
    created_total: int
    retired_total: int
    create_failures_total: int


class PoolStatus(BaseModel):
    """A snapshot of the whole pool."""

    groups: list[GroupStatus]
    waiting: int
    max_waiting: int
    policies: list[PolicyVersion] = Field(
        default_factory=list, description="Each policy in force: its digest and load time."
    )


class _Group:
    def __init__(self, image: str, policy: Policy, *, retiring: bool = False) -> None:
        self.image = image
        self.policy = policy
        self.retiring = retiring  # an old version of its policy: drained, never reused
        self.idle: list[_Slot] = []
        self.busy = 0
        self.starting = 0
        self.resetting: set[_Slot] = set()
        self.waiting = 0
        self.created_total = 0
        self.retired_total = 0
        self.create_failures_total = 0
        self.warm_target: int | None = None  # set by an elastic sizer; None: the policy's warm
        self.changed = asyncio.Condition()

    @property
    def warm(self) -> int:
        """Unbound sandboxes to keep ready: the sizer's target, else the policy's ``warm``."""
        return self.policy.pool.warm if self.warm_target is None else self.warm_target

    @property
    def total(self) -> int:
        return len(self.idle) + self.busy + self.starting + len(self.resetting)

    def reusable_soon(self, tenant: str) -> bool:
        """A sandbox of ``tenant`` is being reset and will be idle in a moment."""
        return any(slot.tenant == tenant for slot in self.resetting)

    @property
    def drained(self) -> bool:
        return self.retiring and self.total == 0 and self.waiting == 0

    @property
    def unbound_ready(self) -> int:
        return sum(1 for slot in self.idle if slot.tenant is None) + self.starting

    def take_idle(self, tenant: str) -> _Slot | None:
        for slot in self.idle:
            if slot.tenant == tenant:
                self.idle.remove(slot)
                return slot
        for slot in self.idle:
            if slot.tenant is None:
                self.idle.remove(slot)
                return slot
        return None

    def status(self) -> GroupStatus:
        return GroupStatus(
            policy=self.policy.name,
            image=self.image,
            digest=self.policy.digest,
            retiring=self.retiring,
            warm_target=0 if self.retiring else self.warm,
            max=self.policy.pool.max,
            idle=len(self.idle),
            idle_bound=sum(1 for slot in self.idle if slot.tenant is not None),
            busy=self.busy,
            starting=self.starting,
            resetting=len(self.resetting),
            waiting=self.waiting,
            created_total=self.created_total,
            retired_total=self.retired_total,
            create_failures_total=self.create_failures_total,
        )


class Pool:
    """Pre-warmed sandboxes, leased per tenant; see the module docstring for the rules."""

    def __init__(
        self,
        backend: Backend,
        *,
        max_waiters: int = DEFAULT_MAX_WAITERS,
        start_concurrency: int = DEFAULT_START_CONCURRENCY,
        lease_timeout_s: float = DEFAULT_LEASE_TIMEOUT_S,
        health_interval_s: float = DEFAULT_HEALTH_INTERVAL_S,
        quotas: QuotaLookup = unlimited,
        refill: RefillHook | None = None,
    ) -> None:
        self.backend = backend
        self.quotas = quotas
        self.refill = refill
        self._held: Counter[str] = Counter()  # sandboxes each tenant holds or is starting
        self.max_waiters = max_waiters
        self.lease_timeout_s = lease_timeout_s
        self.health_interval_s = health_interval_s
        self._starts = asyncio.Semaphore(start_concurrency)
        self._groups: dict[tuple[str, str], _Group] = {}
        self._draining: list[_Group] = []  # retiring groups whose key a live group took back
        self._stale: set[str] = set()  # digests of retired policy versions
        self._tasks: set[asyncio.Task[None]] = set()
        self._health: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        """Remove leftovers of earlier runs and begin health checks."""
        await self.backend.remove_orphans()
        self._health = asyncio.create_task(self._health_loop(), name="pool-health")

    async def warm(self, image: str, policy: Policy, *, wait: bool = False) -> None:
        """Start warming ``policy``'s group; with ``wait``, return once it is warm."""
        group = self._group(image, policy)
        self._refill(group)
        if wait:
            async with group.changed:
                await group.changed.wait_for(
                    lambda: (
                        sum(1 for s in group.idle if s.tenant is None) >= policy.pool.warm
                        or (group.starting == 0 and group.create_failures_total > 0)
                    )
                )
            if sum(1 for s in group.idle if s.tenant is None) < policy.pool.warm:
                raise InfrastructureError(
                    f"could not warm policy {policy.name!r}: container creation failed; "
                    "see the service log"
                )

    @contextlib.asynccontextmanager
    async def lease(self, image: str, policy: Policy, tenant: str) -> AsyncIterator[Lease]:
        """Hold a clean sandbox of ``policy`` bound to ``tenant`` for the ``async with`` body."""
        with tracing.span("lease", tenant=tenant, policy=policy.name) as span:
            lease = await self.checkout(image, policy, tenant)
            span.set(sandbox=lease.sandbox.id[:12])
            try:
                yield lease
            except _REQUEST_ERRORS:
                raise  # the runner answered; the sandbox is reset and reused as usual
            except BaseException as exc:
                lease.retire(f"the lease ended with {type(exc).__name__}: {exc}")
                raise
            finally:
                self.checkin(lease)

    async def checkout(self, image: str, policy: Policy, tenant: str) -> Lease:
        """Take a clean sandbox for as long as the caller likes (sessions); see :meth:`checkin`."""
        if self._closed:
            raise InfrastructureError("the pool is shutting down")
        group = self._group(image, policy)
        with tracing.span("queue_wait", tenant=tenant, policy=policy.name):
            slot = await self._acquire(group, tenant)
        return Lease(slot, group)

    def checkin(self, lease: Lease) -> None:
        """Give a checked-out sandbox back: reset and reused, or retired; idempotent."""
        if lease.returned:
            return
        lease.returned = True
        self._release(lease.group, lease._slot, lease.retire_reason)

    def held(self, tenant: str) -> int:
        """Sandboxes ``tenant`` holds or is starting (what ``max_concurrency`` bounds)."""
        return self._held[tenant]

    def status(self) -> PoolStatus:
        self._drop_drained()
        return PoolStatus(
            groups=[group.status() for group in self._all_groups()],
            waiting=self._waiting(),
            max_waiting=self.max_waiters,
        )

    async def close(self) -> None:
        """Stop background work and destroy every sandbox; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._health is not None:
            self._health.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        closing = [slot.sandbox.close() for g in self._all_groups() for slot in g.idle]
        for group in self._all_groups():
            group.idle.clear()
            async with group.changed:
                group.changed.notify_all()
        await asyncio.gather(*closing, return_exceptions=True)
        await self.backend.close()

    def _group(self, image: str, policy: Policy) -> _Group:
        key = (image, policy.digest)
        group = self._groups.get(key)
        if group is None:
            retiring = policy.digest in self._stale  # a request that took the policy before
            group = self._groups[key] = _Group(image, policy, retiring=retiring)
        return group

    def _all_groups(self) -> list[_Group]:
        return [*self._groups.values(), *self._draining]

    def _waiting(self) -> int:
        return sum(group.waiting for group in self._all_groups())

    def retire_policies(self, names: set[str], keep: set[str]) -> set[tuple[str, str]]:
        """Retire the groups of policies ``names`` (and of environments derived from them,
        ``<name>.env-*``) whose digest is not in ``keep``, the digests now in force.

        Idle sandboxes of those groups are destroyed now; leased ones when their lease
        ends; none is reset and leased again. A later lease of a retired version (a
        request that looked its policy up before the reload) gets a sandbox that is
        retired after it too. Returns the (image, policy name) of the groups retired.
        """
        self._stale -= keep
        retired: set[tuple[str, str]] = set()
        for key, group in list(self._groups.items()):
            digest = group.policy.digest
            if group.retiring and digest in keep:
                del self._groups[key]  # the version is in force again: a live group takes over
                self._draining.append(group)
            base = group.policy.name.split(".env-", 1)[0]
            if group.retiring or digest in keep or base not in names:
                continue
            group.retiring = True
            self._stale.add(digest)
            retired.add((group.image, group.policy.name))
            for slot in list(group.idle):
                group.idle.remove(slot)
                self._retire(group, slot, f"policy {group.policy.name!r} was reloaded")
            self._spawn(self._notify(group))
        self._drop_drained()
        return retired

    def _drop_drained(self) -> None:
        """Forget retiring groups with nothing left in them."""
        for key, group in list(self._groups.items()):
            if group.drained:
                del self._groups[key]
        self._draining = [group for group in self._draining if not group.drained]

    async def _acquire(self, group: _Group, tenant: str) -> _Slot:
        deadline = time.monotonic() + self.lease_timeout_s
        async with group.changed:
            while True:
                self._purge_dead(group)
                self._check_quota(tenant)
                slot = group.take_idle(tenant)
                if slot is not None:
                    slot.tenant = tenant
                    group.busy += 1
                    self._held[tenant] += 1
                    self._refill(group)
                    return slot
                # Waiting a few milliseconds for a reset beats starting a container.
                soon = group.reusable_soon(tenant)
                if not soon and group.total >= group.policy.pool.max:
                    self._evict_other_tenant(group, tenant)
                if not soon and group.total < group.policy.pool.max:
                    group.starting += 1
                    self._held[tenant] += 1
                    break
                if not soon and self._waiting() >= self.max_waiters:
                    raise CapacityError(
                        f"all {group.policy.pool.max} sandboxes of policy "
                        f"{group.policy.name!r} are busy and {self.max_waiters} requests "
                        "are already waiting; retry later",
                        retry_after=1.0,
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CapacityError(
                        f"no sandbox of policy {group.policy.name!r} became free within "
                        f"{self.lease_timeout_s:.0f} s; retry later",
                        retry_after=2.0,
                    )
                group.waiting += 1
                try:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(group.changed.wait(), remaining)
                finally:
                    group.waiting -= 1
                if self._closed:
                    raise InfrastructureError("the pool is shutting down")
        # The start runs on its own: cancelling this caller (a request timeout, a client
        # gone) cancels only the claim, and the new sandbox goes idle instead.
        claim: asyncio.Future[_Slot] = asyncio.get_running_loop().create_future()
        self._spawn(self._start(group, claim))
        try:
            slot = await claim
        except BaseException:
            self._unhold(tenant)
            if claim.done() and not claim.cancelled() and claim.exception() is None:
                self._release(group, claim.result(), None)  # handed over as the cancel came
            raise
        slot.tenant = tenant
        return slot

    def _check_quota(self, tenant: str) -> None:
        """:class:`QuotaError` if ``tenant`` already holds its ``max_concurrency`` sandboxes."""
        limit = self.quotas(tenant).max_concurrency
        held = self._held[tenant]
        if limit is not None and held >= limit:
            raise QuotaError(
                f"tenant {tenant!r} already holds {held} sandboxes (runs, judged items and "
                f"open sessions count) and its max_concurrency is {limit}; wait for one to "
                "finish or close a session",
                retry_after=1.0,
            )

    def _unhold(self, tenant: str) -> None:
        self._held[tenant] -= 1
        if self._held[tenant] <= 0:
            del self._held[tenant]

    def _purge_dead(self, group: _Group) -> None:
        """Retire idle sandboxes already known to be dead, before anyone leases them."""
        for slot in [slot for slot in group.idle if not slot.sandbox.alive]:
            group.idle.remove(slot)
            self._retire(group, slot, "died while idle")

    def _evict_other_tenant(self, group: _Group, tenant: str) -> None:
        for slot in group.idle:
            if slot.tenant is not None and slot.tenant != tenant:
                group.idle.remove(slot)
                self._retire(group, slot, "evicted for another tenant")
                return

    async def _create(self, group: _Group) -> Sandbox | None:
        """Create and start one sandbox; ``None`` (logged and counted) if that failed."""
        started = time.monotonic()
        try:
            sandbox = await self.backend.create(group.image, group.policy)
        except SandboxError as exc:
            logger.error("could not start a sandbox for %s: %s", group.policy.name, exc)
            group.create_failures_total += 1
            return None
        except Exception:
            logger.exception("could not start a sandbox for %s", group.policy.name)
            group.create_failures_total += 1
            return None
        group.created_total += 1
        if self.refill is not None:
            self.refill.started(group.policy.name, time.monotonic() - started)
        return sandbox

    def set_warm_target(self, image: str, policy: Policy, target: int) -> int:
        """Keep ``target`` unbound sandboxes of the group warm (within 0 and the policy's
        ``max``): more are started, idle ones beyond it are retired. Returns the target set."""
        group = self._group(image, policy)
        group.warm_target = max(0, min(target, policy.pool.max))
        surplus = [slot for slot in group.idle if slot.tenant is None][group.warm_target :]
        for slot in surplus:
            group.idle.remove(slot)
            group.retired_total += 1
            self._spawn(slot.sandbox.close())
        self._refill(group)
        return group.warm_target

    def _refill(self, group: _Group) -> None:
        if self._closed or group.retiring:
            return
        while (
            group.unbound_ready < group.warm
            and group.total < group.policy.pool.max
            and self._may_refill(group)
        ):
            group.starting += 1
            self._spawn(self._start(group))

    def _may_refill(self, group: _Group) -> bool:
        if self.refill is None:
            return True
        busy = sum(g.busy for g in self._all_groups())
        return self.refill.may_refill(group.policy.name, busy, group.starting)

    async def _start(self, group: _Group, claim: asyncio.Future[_Slot] | None = None) -> None:
        """Start one sandbox already counted in ``starting``, and place it.

        It goes to the lease waiting on ``claim``; for a refill, or a lease cancelled
        meanwhile, it is idle (warm capacity). A lease cancelled before a start slot was
        free gets none created. ``starting`` is given up on every exit, in the same step
        that places the sandbox, so the group's total never dips below what exists.
        """
        sandbox: Sandbox | None = None
        try:
            async with self._starts:
                if not self._closed and not (claim is not None and claim.cancelled()):
                    sandbox = await self._create(group)
        finally:
            group.starting -= 1
            if sandbox is not None and claim is not None and not claim.done():
                group.busy += 1
                claim.set_result(_Slot(sandbox))
            elif sandbox is not None:
                group.idle.append(_Slot(sandbox))
            elif claim is not None and not claim.done():
                claim.set_exception(
                    InfrastructureError(
                        "the pool is shutting down"
                        if self._closed
                        else f"could not start a sandbox for policy {group.policy.name!r}; "
                        "see the service log"
                    )
                )
        await self._notify(group)
        if sandbox is None and claim is None:
            await asyncio.sleep(REFILL_BACKOFF_S)
            self._refill(group)
        elif claim is None and self.refill is not None:
            self._refill(group)  # a refill the hook held back may go now

    def _release(self, group: _Group, slot: _Slot, retire_reason: str | None) -> None:
        group.busy -= 1
        if slot.tenant is not None:
            self._unhold(slot.tenant)
        slot.uses += 1
        if retire_reason is None and not slot.sandbox.alive:
            retire_reason = "the sandbox died"
        if retire_reason is None and slot.uses >= group.policy.pool.max_uses:
            retire_reason = f"reached max_uses={group.policy.pool.max_uses}"
        if retire_reason is None and group.retiring:
            retire_reason = f"policy {group.policy.name!r} was reloaded"
        if retire_reason is not None or self._closed:
            self._retire(group, slot, retire_reason or "pool closing")
            self._spawn(self._notify(group))
            return
        group.resetting.add(slot)
        self._spawn(self._reset(group, slot))

    async def _reset(self, group: _Group, slot: _Slot) -> None:
        with tracing.span("reset", tenant=slot.tenant, policy=group.policy.name) as span:
            try:
                problems = await slot.sandbox.reset()
            except SandboxError as exc:
                problems = [f"reset failed: {exc}"]
            span.set(status="clean" if not problems else "retired")
        async with group.changed:
            group.resetting.discard(slot)
            if group.retiring and not problems:
                problems = [f"policy {group.policy.name!r} was reloaded"]
            if problems or self._closed:
                self._retire(group, slot, "; ".join(problems) or "pool closing")
            else:
                slot.idle_since = time.monotonic()
                group.idle.append(slot)
            group.changed.notify_all()

    def _retire(self, group: _Group, slot: _Slot, reason: str) -> None:
        """Destroy ``slot`` (already removed from idle/busy counts) and warm a replacement."""
        group.retired_total += 1
        logger.info("retiring sandbox %s: %s", slot.sandbox.id[:12], reason)
        self._spawn(slot.sandbox.close())
        self._refill(group)

    async def _notify(self, group: _Group) -> None:
        async with group.changed:
            group.changed.notify_all()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("pool background task failed", exc_info=task.exception())

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval_s)
            for group in self._all_groups():
                await self._check_group(group)
            self._drop_drained()

    async def _check_group(self, group: _Group) -> None:
        now = time.monotonic()
        async with group.changed:
            candidates = list(group.idle)
        for slot in candidates:
            expired = slot.tenant is not None and now - slot.idle_since > BOUND_IDLE_TTL_S
            healthy = not expired and await slot.sandbox.ping()
            if healthy:
                continue
            async with group.changed:
                if slot in group.idle:
                    group.idle.remove(slot)
                    self._retire(group, slot, "idle too long" if expired else "failed liveness")
                    group.changed.notify_all()
