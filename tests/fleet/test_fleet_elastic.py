"""Elastic warm pools on a real pool and Docker engine: measured starts feed the sizer, and
refills go one at a time while the host's execution load is high."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from sandbox.backends.docker import DockerBackend
from sandbox.core.pool import Pool
from sandbox.fleet.config import WarmSettings
from sandbox.fleet.warm import ElasticWarm, WarmSizer
from sandbox.policy import Policy
from tests.conftest import make_policy

pytestmark = pytest.mark.docker

SLOTS = 6
ASSUMED_START_S = 30.0  # far from a real start: the measured figure must replace it


@asynccontextmanager
async def peak_starting(pool: Pool, policy: str) -> AsyncIterator[list[int]]:
    """The most containers of ``policy`` seen starting at once while the block runs."""
    peak = [0]

    async def watch() -> None:
        while True:
            for group in pool.status().groups:
                if group.policy == policy:
                    peak[0] = max(peak[0], group.starting)
            await asyncio.sleep(0.005)

    watcher = asyncio.create_task(watch())
    try:
        yield peak
    finally:
        watcher.cancel()


async def idle(pool: Pool, policy: Policy, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        groups = [g for g in pool.status().groups if g.policy == policy.name]
        if groups and groups[0].idle >= count and groups[0].starting == 0:
            return
        assert time.monotonic() < deadline, groups
        await asyncio.sleep(0.05)


async def test_refills_go_one_at_a_time_under_load_and_starts_are_measured(
    backend: DockerBackend, python_image: str
) -> None:
    sizer = WarmSizer(WarmSettings(refill_throttle_load=0.5, initial_start_s=ASSUMED_START_S))
    pool = Pool(backend, start_concurrency=4, refill=ElasticWarm(sizer, lambda: SLOTS))
    busy = make_policy("busy", pool={"warm": 0, "max": 4})  # its own digest: its own group
    elastic = make_policy("elastic", pool={"warm": 0, "max": SLOTS})
    await pool.start()
    leases = []
    try:
        # 4 of the 6 slots busy (load 0.67, above the throttle's 0.5)
        leases = list(
            await asyncio.gather(*(pool.checkout(python_image, busy, "t") for _ in range(4)))
        )
        async with peak_starting(pool, "elastic") as loaded:
            pool.set_warm_target(python_image, elastic, 3)
            await idle(pool, elastic, 3)
        assert loaded[0] == 1, "refills under load must go one at a time"
        for lease in leases:
            pool.checkin(lease)
        leases = []
        async with peak_starting(pool, "elastic") as unloaded:
            pool.set_warm_target(python_image, elastic, SLOTS)
            await idle(pool, elastic, SLOTS)
        assert unloaded[0] > 1, "without load, refills start in parallel"
        for name in ("busy", "elastic"):  # every creation was timed and fed to the sizer
            assert 0 < sizer.start_time(name) < ASSUMED_START_S, name
    finally:
        for lease in leases:
            pool.checkin(lease)
        await pool.close()
