"""The fleet scheduler: classes with ageing, weighted fair share, quotas, admission, cancellation.

Time is a clock the test moves (no sleeps, no timed assertions); slots are held until the
test lets them go, so every order asserted here is the scheduler's decision.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from sandbox.errors import CapacityError, InvalidRequestError
from sandbox.fleet.config import FleetConfig
from sandbox.fleet.scheduler import MAX_RETRY_AFTER_S, Scheduler


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make(config: dict[str, Any] | None = None, capacity: int = 1) -> tuple[Scheduler, Clock]:
    clock = Clock()
    scheduler = Scheduler(FleetConfig.model_validate(config or {}), clock=clock)
    scheduler.set_capacity(capacity)
    return scheduler, clock


async def settle() -> None:
    """Let every runnable task reach its next wait."""
    for _ in range(5):
        await asyncio.sleep(0)


class Holder:
    """Takes a slot and keeps it until released."""

    def __init__(self, scheduler: Scheduler, tenant: str = "holder", klass: str = "training"):
        self.release = asyncio.Event()
        self.task = asyncio.create_task(self._hold(scheduler, tenant, klass))

    async def _hold(self, scheduler: Scheduler, tenant: str, klass: str) -> None:
        async with scheduler.slot(tenant, klass):
            await self.release.wait()


def submit(
    scheduler: Scheduler, order: list[str], label: str, tenant: str, klass: str
) -> asyncio.Task[None]:
    """A request that records when it is granted and finishes at once."""

    async def run() -> None:
        async with scheduler.slot(tenant, klass):
            order.append(label)
            await asyncio.sleep(0)

    return asyncio.create_task(run())


async def test_a_higher_class_is_served_first() -> None:
    scheduler, _ = make()
    holder = Holder(scheduler)
    await settle()
    order: list[str] = []
    tasks = [submit(scheduler, order, f"train{i}", "a", "training") for i in range(3)]
    tasks += [submit(scheduler, order, f"eval{i}", "a", "evaluation") for i in range(2)]
    tasks += [submit(scheduler, order, f"inter{i}", "a", "interactive") for i in range(2)]
    await settle()
    assert scheduler.stats().queued == {"interactive": 2, "evaluation": 2, "training": 3}
    holder.release.set()
    await asyncio.gather(holder.task, *tasks)
    assert order == ["inter0", "inter1", "eval0", "eval1", "train0", "train1", "train2"]


@pytest.mark.parametrize(("waited", "low_first"), [(10.0, False), (301.0, True)])
async def test_a_low_class_past_max_wait_goes_before_new_high_arrivals(
    waited: float, low_first: bool
) -> None:
    scheduler, clock = make()  # training: max_wait_s 300
    holder = Holder(scheduler)
    await settle()
    order: list[str] = []
    tasks = [submit(scheduler, order, "train", "a", "training")]
    await settle()
    clock.now = waited
    tasks += [submit(scheduler, order, f"inter{i}", "b", "interactive") for i in range(3)]
    await settle()
    holder.release.set()
    await asyncio.gather(holder.task, *tasks)
    assert (order[0] == "train") is low_first
    assert order.index("train") == (0 if low_first else 3)


async def test_ageing_bounds_the_wait_under_a_continuous_flood() -> None:
    """High-class work keeps arriving, one grant a second; the low item is served by its
    max_wait_s, and not before high work had the fleet for most of that time."""
    config = {
        "classes": {
            "high": {"weight": 10, "max_wait_s": 1},
            "low": {"weight": 1, "max_wait_s": 20},
        },
        "default_class": {"run": "high", "session": "high", "batch": "low"},
    }
    scheduler, clock = make(config)
    holder = Holder(scheduler, klass="high")
    await settle()
    served_at: dict[str, float] = {}
    low = asyncio.create_task(_record(scheduler, served_at, "low", "low", clock))
    flood: list[asyncio.Task[None]] = []
    for step in range(40):
        flood += [
            asyncio.create_task(_record(scheduler, served_at, f"h{step}.{i}", "high", clock))
            for i in range(2)
        ]
        await settle()
        holder.release.set()
        clock.now += 1.0
        if "low" in served_at:
            break
    for task in (low, *flood):
        task.cancel()
    await asyncio.gather(low, *flood, return_exceptions=True)
    assert 15.0 <= served_at.get("low", float("inf")) <= 21.0
    assert scheduler.stats().busy == 0


async def _record(
    scheduler: Scheduler, log: dict[str, float], label: str, klass: str, clock: Clock
):
    async with scheduler.slot("t-" + klass, klass):
        log[label] = clock.now
        while clock.now == log[label]:  # hold the slot for one tick of the test's clock
            await asyncio.sleep(0)


@pytest.mark.parametrize("weights", [(1, 3), (1, 2, 4)])
async def test_weighted_fair_share_between_flooding_tenants(weights: tuple[int, ...]) -> None:
    tenants = {f"t{i}": {"weight": w} for i, w in enumerate(weights)}
    scheduler, _ = make({"tenants": tenants}, capacity=4)
    holders = [Holder(scheduler) for _ in range(4)]
    await settle()
    order: list[str] = []
    tasks = [
        submit(scheduler, order, name, name, "training") for name in tenants for _ in range(400)
    ]
    await settle()
    for holder in holders:
        holder.release.set()
    await asyncio.gather(*(h.task for h in holders), *tasks)
    window = Counter(order[:350])  # every tenant is still backlogged in this window
    total = sum(weights)
    for (name, settings), weight in zip(tenants.items(), weights, strict=True):
        expected = 350 * weight / total
        assert abs(window[name] - expected) <= 0.15 * expected, (settings, window)


async def test_an_idle_tenant_banks_no_credit() -> None:
    """A tenant that was away does not get a burst of everyone else's share on return."""
    scheduler, _ = make({"tenants": {"a": {"weight": 1}, "b": {"weight": 1}}})
    holder = Holder(scheduler)
    await settle()
    order: list[str] = []
    first = [submit(scheduler, order, "a", "a", "training") for _ in range(100)]
    await settle()
    holder.release.set()
    await settle()  # a has been served alone for a while
    later = [submit(scheduler, order, "b", "b", "training") for _ in range(100)]
    await asyncio.gather(holder.task, *first, *later)
    start = order.index("b")
    assert Counter(order[start : start + 20]) == {"a": 10, "b": 10}


async def test_a_tenant_at_its_quota_waits_while_others_go() -> None:
    scheduler, _ = make({"tenants": {"a": {"max_concurrent": 2}}}, capacity=10)
    gate = asyncio.Event()
    peak = {"a": 0}

    async def run(tenant: str) -> None:
        async with scheduler.slot(tenant, "training"):
            peak[tenant] = max(peak.get(tenant, 0), scheduler.stats().running.get(tenant, 0))
            await gate.wait()

    tasks = [asyncio.create_task(run("a")) for _ in range(6)]
    tasks += [asyncio.create_task(run("b")) for _ in range(3)]
    await settle()
    stats = scheduler.stats()
    assert stats.running == {"a": 2, "b": 3}
    assert stats.queued["training"] == 4
    gate.set()
    await asyncio.gather(*tasks)
    assert peak == {"a": 2, "b": 3}
    assert scheduler.stats().served == {"a": 6, "b": 3}


async def _fill_and_drain(completions: int, over_s: float) -> float:
    """Retry-After of a full queue after ``completions`` spread over ``over_s`` seconds."""
    scheduler, clock = make({"queue": {"max_waiting": 5, "drain_window_s": 10}})
    for i in range(completions):
        clock.now = over_s * (i + 1) / completions
        async with scheduler.slot("a", "training"):
            pass
    holder = Holder(scheduler)
    await settle()
    waiting = [submit(scheduler, [], "w", "a", "training") for _ in range(5)]
    await settle()
    assert scheduler.waiting == 5
    with pytest.raises(CapacityError) as caught:
        async with scheduler.slot("b", "interactive"):
            pass
    assert scheduler.stats().rejected == 1
    holder.release.set()
    await asyncio.gather(holder.task, *waiting)
    return caught.value.retry_after


async def test_past_the_queue_bound_retry_after_follows_the_drain_rate() -> None:
    slow = await _fill_and_drain(completions=10, over_s=10.0)  # 1 per second
    fast = await _fill_and_drain(completions=50, over_s=10.0)  # 5 per second
    assert slow == pytest.approx(5 / 1.0)
    assert fast == pytest.approx(5 / 5.0)


async def test_with_nothing_drained_retry_after_is_the_ceiling() -> None:
    assert await _fill_and_drain(completions=0, over_s=1.0) == MAX_RETRY_AFTER_S


async def test_a_waiter_cancelled_in_the_queue_leaves_no_trace() -> None:
    scheduler, _ = make()
    holder = Holder(scheduler)
    await settle()
    order: list[str] = []
    doomed = submit(scheduler, order, "doomed", "a", "training")
    kept = submit(scheduler, order, "kept", "b", "training")
    await settle()
    doomed.cancel()
    await settle()
    assert scheduler.waiting == 1
    assert scheduler.stats().queued["training"] == 1
    holder.release.set()
    await asyncio.gather(holder.task, kept)
    assert doomed.cancelled()
    assert order == ["kept"]
    stats = scheduler.stats()
    assert (stats.busy, stats.running, scheduler.waiting) == (0, {}, 0)
    assert "a" not in stats.served


async def test_a_waiter_granted_then_cancelled_before_it_resumes_gives_the_slot_back() -> None:
    scheduler, _ = make()
    held = scheduler.slot("a", "training")
    await held.__aenter__()
    order: list[str] = []
    granted_late = submit(scheduler, order, "late", "b", "training")
    after = submit(scheduler, order, "after", "c", "training")
    await settle()
    await held.__aexit__(None, None, None)  # hands the slot to "late"...
    granted_late.cancel()  # ...which is cancelled before it runs again
    await asyncio.gather(granted_late, after, return_exceptions=True)
    assert granted_late.cancelled()
    assert order == ["after"]
    stats = scheduler.stats()
    assert (stats.busy, stats.running) == (0, {})
    assert "b" not in stats.served


async def test_everyone_cancelled_at_once_leaks_no_slot() -> None:
    scheduler, _ = make(capacity=3)
    gate = asyncio.Event()

    async def run(tenant: str) -> None:
        async with scheduler.slot(tenant, "training"):
            await gate.wait()

    tasks = [asyncio.create_task(run(t)) for t in ["a", "b"] * 50]
    await settle()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    stats = scheduler.stats()
    assert (stats.busy, stats.running, scheduler.waiting) == (0, {}, 0)
    async with scheduler.slot("a", "training"):
        assert scheduler.stats().busy == 1


async def test_a_slot_is_released_once_when_the_holder_raises() -> None:
    scheduler, clock = make(capacity=2)
    with pytest.raises(RuntimeError):
        async with scheduler.slot("a", "training"):
            raise RuntimeError("boom")
    clock.now = 1.0
    assert scheduler.stats().busy == 0
    assert scheduler.stats().drain_per_s == pytest.approx(1.0)


async def test_capacity_changes_take_effect() -> None:
    scheduler, _ = make(capacity=0)
    order: list[str] = []
    tasks = [submit(scheduler, order, str(i), "a", "training") for i in range(3)]
    await settle()
    assert order == [] and scheduler.waiting == 3
    scheduler.set_capacity(3)
    await asyncio.gather(*tasks)
    assert sorted(order) == ["0", "1", "2"]


async def test_an_unknown_class_is_refused() -> None:
    scheduler, _ = make()
    with pytest.raises(InvalidRequestError, match="urgent"):
        async with scheduler.slot("a", "urgent"):
            pass
