"""The router's own rules over synthetic hosts (no cluster): the per-host bound on container
starts (waited for, counting the starts placed since the last heartbeat), calls in flight
on a host that is lost, and the autoscaler request (counted only once Ray took it)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

pytest.importorskip("ray")

from sandbox.core.pool import GroupStatus, PoolStatus
from sandbox.errors import FleetUnavailableError
from sandbox.fleet.agent import HostStatus
from sandbox.fleet.channel import ChannelClient, ChannelClosedError, ChannelServer
from sandbox.fleet.config import FleetConfig, parse_fleet_config
from sandbox.fleet.router import SCALE_FAILURES, SCALE_REQUESTS, Host, HostLostError, Router
from sandbox.fleet.scheduler import SchedulerStats
from sandbox.fleet.status import HostState
from sandbox.fleet.wire import Reply
from sandbox.service.platform import PlatformSettings

POLICY = "default"


def beat(host: Host, *, idle: int = 0, starting: int = 0, slots: int = 4) -> None:
    """What a heartbeat does to ``host``: its fresh status, and the router's counts reset."""
    group = GroupStatus(
        policy=POLICY,
        image="python",
        warm_target=1,
        max=slots,
        idle=idle,
        idle_bound=0,
        busy=0,
        starting=starting,
        resetting=0,
        waiting=0,
        created_total=0,
        retired_total=0,
        create_failures_total=0,
    )
    host.status = HostStatus(
        node_id=host.node_id,
        name=host.node_id,
        owner="test",
        started=True,
        draining=False,
        released=False,
        slots=slots,
        in_flight=0,
        sessions=0,
        pool=PoolStatus(groups=[group], waiting=0, max_waiting=100),
        images={"python": "python"},
        policies=[POLICY],
        reported_at=time.time(),
    )
    host.state = HostState.HEALTHY
    host.sent_since_beat = host.starts_since_beat = 0
    host.beats += 1


def router(config: str, *names: str) -> Router:
    made = Router(PlatformSettings(), parse_fleet_config(config) if config else FleetConfig())
    for name in names:
        host = made.hosts[name] = Host(node_id=name, actor=None)
        beat(host)
    return made


async def pending(task: asyncio.Task[Any]) -> bool:
    await asyncio.sleep(0.05)
    return not task.done()


async def test_starts_placed_since_the_beat_count_and_a_host_at_its_bound_is_waited_for() -> None:
    # heartbeats far apart: only the starts this router placed can change the picture
    fleet = router(
        "quotas: {max_starts_in_flight_per_host: 2}\nhealth: {heartbeat_interval_s: 300}\n", "a"
    )
    host = fleet.hosts["a"]
    first = await fleet._place(POLICY, "t", set())
    second = await fleet._place(POLICY, "t", set())
    assert first[1] is not None and second[1] is not None  # no warm container: each starts one
    assert host.load(2).starts_in_flight == 2  # the beat said 0: the two placed since count
    third = asyncio.create_task(fleet._place(POLICY, "t", set()))
    assert await pending(third), "a host at its bound of starts took a third"
    fleet._start_done(first[1])  # one of them ended: room for one more
    placed, start = await asyncio.wait_for(third, 5)
    assert placed is host and start is not None
    # A heartbeat that shows the host's own starts (refills too) at the bound holds calls back
    beat(host, starting=2)
    held = asyncio.create_task(fleet._place(POLICY, "t", set()))
    assert await pending(held)
    beat(host, idle=1, starting=2)  # a warm container is idle: a call needing no start goes
    fleet._start_done(second[1])  # (wakes the waiter)
    placed, start = await asyncio.wait_for(held, 5)
    assert placed is host and start is None


async def test_a_host_at_its_bound_sends_starts_to_another_and_none_serving_is_503() -> None:
    fleet = router("quotas: {max_starts_in_flight_per_host: 1}\n", "a", "b")
    beat(fleet.hosts["a"], starting=1)
    for _ in range(5):  # "a" is at its bound: every start goes to "b" until "b" is too
        host, start = await fleet._place(POLICY, "t", set())
        assert host is fleet.hosts["b"] and start is not None
        fleet._start_done(start)
    with pytest.raises(FleetUnavailableError):  # no host serves this policy: no wait, a 503
        await fleet._place("another-policy", "t", set())


class Silent:
    """An agent that never answers (as a frozen one)."""

    def __init__(self) -> None:
        self.calls = 0
        self.thawed = asyncio.Event()

    async def run_program(self, *args: Any) -> Reply:
        self.calls += 1
        await self.thawed.wait()
        return Reply(value="too late")


class FrozenActor:
    """A Ray actor handle whose calls never answer."""

    class _Method:
        def remote(self, *args: Any) -> asyncio.Future[Any]:
            return asyncio.get_running_loop().create_future()

    def __getattr__(self, name: str) -> Any:
        return self._Method()


async def test_calls_in_flight_on_a_lost_host_fail_at_once_on_the_channel_and_over_ray() -> None:
    fleet = router("", "a")
    host = fleet.hosts["a"]
    host.actor = FrozenActor()
    target = Silent()
    server = ChannelServer(target, "127.0.0.1")
    port = await server.start()
    host.channel = await ChannelClient.open("127.0.0.1", port, server.token)
    try:
        on_channel = asyncio.create_task(fleet._send(host, "run_program", "x", "t"))
        over_ray = asyncio.create_task(fleet._send(host, "session_exec", "s", "c", "t"))
        while not target.calls:
            await asyncio.sleep(0.01)
        assert await pending(on_channel) and await pending(over_ray)
        assert host.in_flight == 2
        fleet._lose(host, "missed 3 heartbeats")
        with pytest.raises(ChannelClosedError, match="missed 3 heartbeats"):
            await asyncio.wait_for(on_channel, 5)
        with pytest.raises(HostLostError, match="missed 3 heartbeats"):
            await asyncio.wait_for(over_ray, 5)
        assert host.in_flight == 0 and host.channel.closed
        fleet._lose(host, "its channel broke under a call")  # the first reason is kept
        assert (host.state, host.reason) == (HostState.LOST, "missed 3 heartbeats")
        with pytest.raises(HostLostError):  # and a Ray call to it now fails at once
            await asyncio.wait_for(fleet._send(host, "session_exec", "s", "c", "t"), 5)
    finally:
        target.thawed.set()
        await host.channel.close()
        await server.close()


async def test_an_autoscale_request_counts_once_ray_took_it_and_a_failure_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import ray.autoscaler.sdk

    fleet = router("autoscale: {queue_threshold: 5, sustain_s: 0, cooldown_s: 0}\n", "a")
    fleet.scheduler_stats = lambda: SchedulerStats(
        capacity=4, busy=4, queued={"training": 50}, running={}, served={}, rejected=0,
        drain_per_s=1.0,
    )  # fmt: skip

    def refuse(**_: Any) -> None:
        raise ConnectionError("no GCS")

    asked: list[list[dict[str, float]]] = []
    requests, failures = SCALE_REQUESTS._value.get(), SCALE_FAILURES._value.get()
    monkeypatch.setattr(ray.autoscaler.sdk, "request_resources", refuse)
    with caplog.at_level(logging.ERROR, logger="sandbox.fleet.router"):
        await fleet._maybe_scale()
    assert SCALE_REQUESTS._value.get() == requests
    assert SCALE_FAILURES._value.get() == failures + 1
    assert "failed: ConnectionError: no GCS" in caplog.text
    monkeypatch.setattr(ray.autoscaler.sdk, "request_resources", lambda **kw: asked.append(kw))
    await fleet._maybe_scale()
    assert SCALE_REQUESTS._value.get() == requests + 1
    assert asked == [{"bundles": [{"sandbox_host": 1}] * 5}]  # 1 host + 50 queued / 4 slots: +4


def test_each_agent_gets_the_per_host_bound_as_its_pools_start_concurrency() -> None:
    tight = Router(PlatformSettings(start_concurrency=8), parse_fleet_config(
        "quotas: {max_starts_in_flight_per_host: 3}\n"
    ))  # fmt: skip
    assert tight._agent_settings()["start_concurrency"] == 3
    loose = Router(PlatformSettings(start_concurrency=2), FleetConfig())
    assert loose._agent_settings()["start_concurrency"] == 2
