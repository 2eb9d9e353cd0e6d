"""The router: finds the host agents of a Ray cluster, watches them, and sends each call to one.

One :class:`~sandbox.fleet.agent.HostAgent` runs on every node that offers the
``sandbox_host`` resource; the router creates it there (or finds it, by name,
when another router did) and heartbeats it. A host that misses
:data:`MISSED_BEATS` heartbeats in a row, or whose actor dies, is out of
rotation at once and listed as lost with the reason.

Each call goes to a host chosen by best of K sampled healthy hosts on fresh
load (the last heartbeat plus what this router sent since). Runs and judgements go on
the agent's direct channel (:mod:`sandbox.fleet.channel`), the rest as Ray actor calls
(and those too while a host's channel is down). Failure semantics:

* every call in flight on a host that is lost (its actor died, its channel broke
  under a call, or it missed its heartbeats) fails at once: the host's channel is
  failed (:class:`~sandbox.fleet.channel.ChannelClosedError`) and its Ray calls are
  abandoned (:class:`HostLostError`), so no call waits on a frozen host;
* a pure judgement (a run, a judgement, a batch item) running on a host that is
  lost is sent once more to another host; lost again, it is an infrastructure
  error (never a wrong answer);
* a host that refuses new work (draining) or has no room is skipped for another;
* a call placed where no warm container is idle for it creates one: each tenant has
  at most its ``max_starts_in_flight`` such calls in flight fleet-wide, and one more
  waits for a warm container or for one of them to end; a host has at most
  ``quotas.max_starts_in_flight_per_host`` starts in flight (its last heartbeat's,
  plus the starts this router placed there since), and when every host that could
  take a call is at that bound and has no warm container for it, the call waits too;
* a drained host's agent is stopped, which gives its node's ``sandbox_host`` back to
  Ray; this router starts no new agent there (a restarted service, or the node
  rejoining under a new id, does);
* a session lives on one host: its calls go there, and once that host is lost
  they answer :class:`~sandbox.errors.SessionLostError` (410);
* with no healthy host, :class:`~sandbox.errors.FleetUnavailableError` (503)
  names the hosts that are down and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from sandbox.errors import (
    ContainerLostError,
    FleetUnavailableError,
    InfrastructureError,
    NotFoundError,
    SessionLostError,
)
from sandbox.fleet.agent import DRAINING, HostAgent, HostStatus
from sandbox.fleet.channel import CALLS, ChannelClient, ChannelClosedError
from sandbox.fleet.config import FleetConfig
from sandbox.fleet.placement import HostLoad, choose_host
from sandbox.fleet.scheduler import SchedulerStats
from sandbox.fleet.status import FleetStatus, HostGroup, HostState, HostView
from sandbox.fleet.warm import AutoscaleAdvisor
from sandbox.fleet.wire import Reply
from sandbox.service.platform import PlatformSettings
from sandbox.telemetry import metrics

logger = logging.getLogger(__name__)

RESOURCE = "sandbox_host"
NAMESPACE = "sandbox-fleet"
DISCOVER_EVERY_BEATS = 5
#: How long a new agent may take to start its platform (warm its pools).
AGENT_START_TIMEOUT_S = 300.0

ROUTED = metrics.Counter(
    "sandbox_fleet_routed_total",
    "Calls answered through the fleet, by host and kind (run, judge, session).",
    ["host", "kind"],
    registry=metrics.REGISTRY,
)
REROUTED = metrics.Counter(
    "sandbox_fleet_rerouted_total",
    "Pure judgements sent again to another host because theirs was lost.",
    registry=metrics.REGISTRY,
)
SCALE_REQUESTS = metrics.Counter(
    "sandbox_fleet_autoscale_requests_total",
    "Times the router asked Ray's autoscaler for more sandbox_host resources (and Ray took it).",
    registry=metrics.REGISTRY,
)
SCALE_FAILURES = metrics.Counter(
    "sandbox_fleet_autoscale_failures_total",
    "Times the router's request to Ray's autoscaler failed (the log says why).",
    registry=metrics.REGISTRY,
)
TENANT_STARTS = metrics.Gauge(
    "sandbox_fleet_tenant_starts_in_flight",
    "Calls in flight that create a container (none was warm where they went), by tenant.",
    ["tenant"],
    registry=metrics.REGISTRY,
)
START_WAITS = metrics.Counter(
    "sandbox_fleet_start_waits_total",
    "Placements held back because their tenant was at its bound of container starts.",
    ["tenant"],
    registry=metrics.REGISTRY,
)
HOST_START_WAITS = metrics.Counter(
    "sandbox_fleet_host_start_waits_total",
    "Placements held back because every host that could take them was at its bound of "
    "container starts in flight, with no warm container for them.",
    registry=metrics.REGISTRY,
)
HOSTS = metrics.Gauge(
    "sandbox_fleet_hosts", "Hosts of the fleet, by state.", ["state"], registry=metrics.REGISTRY
)
QUEUED = metrics.Gauge(
    "sandbox_fleet_queued",
    "Requests waiting fleet-wide for an execution slot, by priority class.",
    ["class"],
    registry=metrics.REGISTRY,
)
QUEUE_MAX = metrics.Gauge(
    "sandbox_fleet_queue_max",
    "Requests that may wait fleet-wide; one more is refused (429).",
    registry=metrics.REGISTRY,
)


class HostLostError(InfrastructureError):
    """The host a Ray call was sent to was lost before it answered; the answer is dropped."""


def _why_lost(exc: Exception) -> str:
    if isinstance(exc, ChannelClosedError):
        return f"its channel broke under a call ({exc})"
    if isinstance(exc, HostLostError):
        return str(exc)
    return f"actor died ({type(exc).__name__})"


@dataclass(eq=False)
class Host:
    """What the router knows of one host agent."""

    node_id: str
    actor: Any
    address: str = "127.0.0.1"
    channel: ChannelClient | None = None
    name: str = ""
    state: HostState = HostState.STARTING
    reason: str = ""
    status: HostStatus | None = None
    misses: int = 0
    in_flight: int = 0  # sent by this router and not answered yet
    sent_since_beat: int = 0
    starts_since_beat: int = 0  # calls placed here since the beat that create a container
    beats: int = 0  # heartbeats answered: a start placed before the last one is in its count
    routed: int = 0  # answered through this router
    last_beat: float = field(default_factory=time.monotonic)
    gone: asyncio.Future[None] | None = None  # set when the host is lost: its Ray calls end

    def __post_init__(self) -> None:
        self.name = self.name or self.node_id[:12]

    def fail_calls(self, why: str) -> None:
        """Fail every call in flight to this host: the channel's and the Ray calls'."""
        if self.channel is not None and not self.channel.closed:
            self.channel.fail(why)
        gone, self.gone = self.gone, None
        if gone is not None and not gone.done():
            gone.set_result(None)

    async def unless_lost(self, call: Any) -> Any:
        """Await the Ray call ``call`` (an object ref), or raise :class:`HostLostError`
        as soon as this host is lost (the call's answer, if it ever comes, is dropped)."""
        if self.state is HostState.LOST:
            raise HostLostError(f"host {self.name} is lost: {self.reason}")
        if self.gone is None:
            self.gone = asyncio.get_running_loop().create_future()
        gone = self.gone
        answer = asyncio.ensure_future(call)
        try:
            await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
            if answer.done():
                return answer.result()
        finally:
            if not answer.done():
                answer.cancel()
        raise HostLostError(f"host {self.name} was lost under the call: {self.reason}")

    def idle_warm(self) -> dict[str, int]:
        """Unbound idle containers per policy, less the calls this router sent since the beat.

        Groups are policies; every policy the host loaded is a group it serves.
        """
        status = self.status
        pool = status.pool if status is not None else None
        idle = dict.fromkeys(status.policies if status is not None else (), 0)
        for group in pool.groups if pool is not None else ():
            idle[group.policy] = idle.get(group.policy, 0) + group.idle - group.idle_bound
        return {name: max(0, n - self.sent_since_beat) for name, n in idle.items()}

    def load(self, max_starts: int) -> HostLoad:
        """Fresh load for placement: the last heartbeat, less what this router sent since."""
        status = self.status
        pool = status.pool if status is not None else None
        fresh = self.idle_warm()
        return HostLoad(
            host_id=self.node_id,
            healthy=self.state is HostState.HEALTHY,
            draining=self.state is HostState.DRAINING,
            slots=status.slots if status is not None else 0,
            # each open session holds one of the host's containers for its life
            busy=max(self.in_flight, status.in_flight if status is not None else 0)
            + (status.sessions if status is not None else 0),
            idle_warm=fresh,
            queue_depth=pool.waiting if pool is not None else 0,
            starts_in_flight=self.starts_since_beat
            + (sum(g.starting for g in pool.groups) if pool is not None else 0),
            max_starts_in_flight=max_starts,
        )


@dataclass(frozen=True, slots=True)
class _Start:
    """A call placed where it creates a container: its tenant, its host, and how many
    heartbeats that host had answered when it was placed."""

    tenant: str
    host: Host
    beats: int


class Router:
    """The fleet's hosts and the routing of calls to them; ``start`` then ``close``."""

    def __init__(
        self, settings: PlatformSettings, config: FleetConfig, *, rng: random.Random | None = None
    ) -> None:
        self.settings = settings
        self.config = config
        self.heartbeat_s = config.health.heartbeat_interval_s
        self.rng = rng or random.Random()
        self.scheduler_stats: Callable[[], SchedulerStats] | None = None
        self.autoscale = AutoscaleAdvisor(config.autoscale)
        self.hosts: dict[str, Host] = {}
        self._beats: asyncio.Task[None] | None = None
        self._starts: set[asyncio.Task[None]] = set()
        self._tenant_starts: Counter[str] = Counter()
        self._homes: dict[tuple[str, str], str] = {}  # (tenant, policy) -> host last serving it
        self._start_ended = asyncio.Event()  # set (and replaced) when a start ends
        self.on_change: Callable[[], None] = lambda: None

    # ------------------------------------------------------------------ hosts

    async def start(self) -> None:
        """Find (or create) the agent of every ``sandbox_host`` node and wait for them to start."""
        await self._discover()
        if self.hosts:
            await asyncio.gather(*list(self._starts), return_exceptions=True)
        if not self.healthy():
            raise FleetUnavailableError(
                f"the fleet has no healthy host: {self._down() or 'no node offers the '}"
                f"{'' if self.hosts else RESOURCE + ' resource'}; start nodes with "
                f"`ray start ... --resources='{{\"{RESOURCE}\": 1}}'`"
            )
        self._beats = asyncio.create_task(self._heartbeat_loop(), name="fleet-heartbeat")

    async def close(self) -> None:
        """Stop watching; the agents (detached actors) keep their pools for the next router."""
        for host in self.hosts.values():
            if host.channel is not None:
                await host.channel.close()
        for task in [self._beats, *self._starts]:
            if task is not None:
                task.cancel()
        await asyncio.gather(
            *[t for t in [self._beats, *self._starts] if t is not None], return_exceptions=True
        )

    def healthy(self) -> list[Host]:
        return [h for h in self.hosts.values() if h.state is HostState.HEALTHY]

    def _down(self) -> str:
        return "; ".join(
            f"{h.name} {h.state.value}" + (f" ({h.reason})" if h.reason else "")
            for h in self.hosts.values()
            if h.state is not HostState.HEALTHY
        )

    def _nodes(self) -> dict[str, str]:
        """Alive nodes offering the host resource, by id, with their address (a blocking
        call to the cluster)."""
        return {
            n["NodeID"]: n["NodeManagerAddress"]
            for n in ray.nodes()
            if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) >= 1
        }

    def _agent_settings(self) -> dict[str, Any]:
        """The platform settings each agent gets: this service's, with the pool's container
        starts at once bounded by ``quotas.max_starts_in_flight_per_host`` (so the host keeps
        the bound itself, whatever several routers place there)."""
        starts = min(
            self.settings.start_concurrency, self.config.quotas.max_starts_in_flight_per_host
        )
        settings = self.settings.model_copy(update={"start_concurrency": starts})
        return settings.model_dump(mode="json")

    async def _discover(self) -> None:
        alive = await asyncio.to_thread(self._nodes)
        for node_id, host in self.hosts.items():
            if node_id not in alive and host.state not in (HostState.LOST, HostState.DRAINED):
                self._lose(host, "its node left the cluster")
        # A drained host stays in ``hosts``: no new agent is started on its node.
        for node_id in sorted(set(alive) - set(self.hosts)):
            actor = (
                ray.remote(HostAgent)
                .options(
                    name=f"sandbox-host-{node_id}",
                    namespace=NAMESPACE,
                    get_if_exists=True,
                    lifetime="detached",
                    num_cpus=0,
                    resources={RESOURCE: 1},
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                    max_restarts=0,
                    max_concurrency=1000,
                )
                .remote(
                    self._agent_settings(),
                    node_id,
                    self.config.warm.model_dump(mode="json"),
                    alive[node_id],
                )
            )
            host = Host(node_id=node_id, actor=actor, address=alive[node_id])
            self.hosts[node_id] = host
            task = asyncio.create_task(self._start_agent(host))
            self._starts.add(task)
            task.add_done_callback(self._starts.discard)

    async def _start_agent(self, host: Host) -> None:
        try:
            reply: Reply = await asyncio.wait_for(host.actor.start.remote(), AGENT_START_TIMEOUT_S)
            reply.unwrap()
            await self._open_channel(host)
            await self._beat(host)
        except RayActorError as exc:
            self._lose(host, f"the agent died while starting: {type(exc).__name__}")
        except Exception as exc:
            host.state, host.reason = HostState.FAILED, f"did not start: {exc}"
            logger.error("fleet host %s %s", host.name, host.reason)
        self._count()

    async def _heartbeat_loop(self) -> None:
        beats = 0
        while True:
            await asyncio.sleep(self.heartbeat_s)
            beats += 1
            with contextlib.suppress(Exception):  # a failed discovery is retried next time
                if beats % DISCOVER_EVERY_BEATS == 0:
                    await self._discover()
            watched = [
                h
                for h in self.hosts.values()
                if h.state not in (HostState.STARTING, HostState.DRAINED)
            ]
            await asyncio.gather(*(self._beat(h) for h in watched))
            self._count()
            await self._maybe_scale()

    async def _maybe_scale(self) -> None:
        """Ask Ray's autoscaler for more ``sandbox_host`` when the queue stayed long."""
        if self.scheduler_stats is None:
            return
        healthy = self.healthy()
        queued = sum(self.scheduler_stats().queued.values())
        per_host = self.slots() // len(healthy) if healthy else 1
        ask = self.autoscale.observe(queued, hosts=len(healthy), slots_per_host=per_host)
        if ask is None:
            return
        from ray.autoscaler.sdk import request_resources

        try:
            await asyncio.to_thread(request_resources, bundles=[{RESOURCE: 1}] * ask.total_hosts)
        except Exception as exc:  # asked again after the cooldown
            SCALE_FAILURES.inc()
            logger.error(
                "fleet queue at %d for %.0f s: asking Ray's autoscaler for %d hosts in all (+%d) "
                "failed: %s: %s",
                ask.queue_length,
                ask.above_for_s,
                ask.total_hosts,
                ask.add_hosts,
                type(exc).__name__,
                exc,
            )
            return
        SCALE_REQUESTS.inc()
        # On a cluster without an autoscaler the request is kept by Ray and nothing grows.
        logger.warning(
            "fleet queue at %d for %.0f s: asked Ray's autoscaler for %d hosts in all (+%d)",
            ask.queue_length,
            ask.above_for_s,
            ask.total_hosts,
            ask.add_hosts,
        )

    async def _beat(self, host: Host) -> None:
        """One heartbeat: fresh load, or a miss (three in a row: lost), or a dead actor (lost)."""
        if host.state is HostState.DRAINED or (
            host.state is HostState.LOST and host.reason.startswith("actor")
        ):
            return  # a dead or stopped actor does not come back; a new agent is a new host
        try:
            status: HostStatus = await asyncio.wait_for(
                host.actor.status.remote(), self.heartbeat_s
            )
        except RayActorError as exc:
            self._lose(host, f"actor died ({type(exc).__name__})")
            if host.state is HostState.LOST:  # final, whatever put it out of rotation first
                host.reason = f"actor died ({type(exc).__name__})"
            return
        except (TimeoutError, ray.exceptions.RayError):
            host.misses += 1
            if (
                host.misses >= self.config.health.missed_heartbeats
                and host.state is not HostState.LOST
            ):
                self._lose(host, f"missed {host.misses} heartbeats")
            return
        host.status, host.name, host.misses, host.sent_since_beat = status, status.name, 0, 0
        host.starts_since_beat = 0  # the starts placed before this beat are in its count
        host.beats += 1
        host.last_beat = time.monotonic()
        if host.channel is None or host.channel.closed:
            await self._open_channel(host)
        if status.released:
            host.state, host.reason = HostState.DRAINED, "drained"
        elif status.draining:
            host.state, host.reason = HostState.DRAINING, "draining"
        elif status.started and host.state is not HostState.FAILED:
            if host.state is HostState.LOST:
                logger.warning("fleet host %s answers again: back in rotation", host.name)
            host.state, host.reason = HostState.HEALTHY, ""

    async def _open_channel(self, host: Host) -> None:
        """Open the direct channel to ``host``; without one its calls go through Ray."""
        try:
            port, token = (await host.actor.channel.remote()).unwrap()
            host.channel = await ChannelClient.open(host.address, port, token)
        except Exception as exc:  # a dead actor is the heartbeat's to find
            host.channel = None
            logger.warning(
                "fleet host %s: no direct channel (%s); calls go through Ray", host.name, exc
            )

    def _lose(self, host: Host, why: str) -> None:
        """Out of rotation (the first reason is kept); every call in flight there fails."""
        if host.state is HostState.DRAINED:  # stopped on purpose: its calls had ended
            host.fail_calls(f"host {host.name} was drained")
            return
        if host.state is not HostState.LOST:
            logger.error("fleet host %s is out of rotation: %s", host.name, why)
            host.state, host.reason = HostState.LOST, why
        host.fail_calls(f"host {host.name} is out of rotation: {host.reason}")
        self._count()

    def _count(self) -> None:
        for state in HostState:
            HOSTS.labels(state.value).set(sum(1 for h in self.hosts.values() if h.state is state))
        self.on_change()

    # ------------------------------------------------------------------ placement

    def require_healthy(self) -> None:
        """Raise :class:`FleetUnavailableError` naming the hosts down when none is healthy."""
        if not self.healthy():
            raise FleetUnavailableError(
                f"no healthy host in the fleet; hosts down: {self._down() or 'none known'}"
            )

    def slots(self) -> int:
        """Execution slots of the healthy hosts (the scheduler's capacity)."""
        return sum(h.status.slots for h in self.healthy() if h.status is not None)

    def choose(
        self, policy: str, *, exclude: set[Host] | None = None, tenant: str | None = None
    ) -> tuple[Host, HostLoad] | None:
        """Best of K sampled healthy hosts on fresh load for ``policy``, and that load;
        ``tenant`` stays on the host that last served it unless that is loaded more.

        ``None`` when every host that could serve ``policy`` is at its bound of container
        starts in flight with no warm container for it (the caller waits); 503 when none
        could serve it at all.
        """
        exclude = exclude or set()
        candidates = {h.node_id: h for h in self.healthy() if h not in exclude}
        max_starts = self.config.quotas.max_starts_in_flight_per_host
        loads = [h.load(max_starts) for h in candidates.values()]
        placement = self.config.placement
        chosen = choose_host(
            loads,
            policy,
            k=placement.k,
            rng=self.rng,
            affinity=self._homes.get((tenant, policy)) if tenant is not None else None,
            affinity_margin=placement.affinity_margin,
        )
        if chosen is not None:
            return candidates[chosen.host_id], chosen
        if any(policy in load.idle_warm and load.slots > 0 for load in loads):
            return None  # each such host is at its bound of starts: wait for one to end
        tried = f"; tried {sorted(h.name for h in exclude)}" if exclude else ""
        raise FleetUnavailableError(
            f"no healthy host in the fleet can take this request{tried}; hosts down: "
            f"{self._down() or 'none known'}"
        )

    async def _place(
        self, policy: str, tenant: str, exclude: set[Host]
    ) -> tuple[Host, _Start | None]:
        """A host for one call of ``tenant``, and the container start the call makes there
        (``None`` when a warm container is idle for it); end the start with :meth:`_start_done`.

        A call that would create one while the tenant has ``max_starts_in_flight`` such
        calls in flight, or while every host that could take it is at its bound of starts
        in flight, waits, placing again when a start ends or a heartbeat brings news.
        """
        limit = self.config.max_starts_in_flight(tenant)
        while True:
            chosen = self.choose(policy, exclude=exclude, tenant=tenant)
            if chosen is None:
                HOST_START_WAITS.inc()
            else:
                host, load = chosen
                if load.idle_warm.get(policy, 0) > 0:
                    host.sent_since_beat += 1
                    return host, None
                if self._tenant_starts[tenant] < limit:
                    host.sent_since_beat += 1
                    host.starts_since_beat += 1
                    self._tenant_starts[tenant] += 1
                    TENANT_STARTS.labels(tenant).set(self._tenant_starts[tenant])
                    return host, _Start(tenant, host, host.beats)
                START_WAITS.labels(tenant).inc()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._start_ended.wait(), self.heartbeat_s)

    def _start_done(self, start: _Start) -> None:
        """The call that made ``start`` ended: its tenant and host may start another."""
        tenant, host = start.tenant, start.host
        self._tenant_starts[tenant] -= 1
        TENANT_STARTS.labels(tenant).set(self._tenant_starts[tenant])
        if host.beats == start.beats and host.starts_since_beat > 0:
            host.starts_since_beat -= 1  # no heartbeat has counted it since it was placed
        ended, self._start_ended = self._start_ended, asyncio.Event()
        ended.set()

    async def call(self, method: str, *args: Any, policy: str, kind: str, tenant: str) -> Any:
        """Run ``method`` of a chosen host's agent; see the module docstring for failures."""
        return (await self.placed_call(method, *args, policy=policy, kind=kind, tenant=tenant))[1]

    async def placed_call(
        self, method: str, *args: Any, policy: str, kind: str, tenant: str
    ) -> tuple[Host, Any]:
        """:meth:`call`, also saying which host answered.

        A host lost under the call raises :class:`ContainerLostError` after one retry
        elsewhere; callers turn it into their infrastructure-error answer.
        """
        tried: set[Host] = set()
        losses = 0
        while True:
            host, start = await self._place(policy, tenant, tried)
            tried.add(host)
            try:
                reply = await self._send(host, method, *args)
            except (RayActorError, ChannelClosedError, HostLostError) as exc:
                self._lose(host, _why_lost(exc))
                losses += 1
                if losses > 1:
                    raise ContainerLostError(
                        f"hosts {sorted(h.name for h in tried)} were lost while running this "
                        "request; it was not judged (an infrastructure error, not a verdict)"
                    ) from None
                REROUTED.inc()
                continue
            finally:
                if start is not None:
                    self._start_done(start)
            if reply.code == DRAINING:
                host.state, host.reason = HostState.DRAINING, "draining"
                continue
            if reply.code == "capacity_exhausted" and self._others(tried):
                continue  # no room there: another host may have some
            self._answered(host, kind)
            self._homes[(tenant, policy)] = host.node_id  # its container is bound there now
            return host, reply.unwrap()

    @staticmethod
    def _answered(host: Host, kind: str) -> None:
        host.routed += 1
        ROUTED.labels(host.name, kind).inc()

    def _others(self, tried: set[Host]) -> bool:
        return any(h not in tried for h in self.healthy())

    async def _send(self, host: Host, method: str, *args: Any) -> Reply:
        """``method`` on ``host``: on its channel, else as a Ray call; either fails at once
        when the host is lost (:meth:`_lose`)."""
        host.in_flight += 1
        try:
            reply: Reply
            channel = host.channel
            if method in CALLS and channel is not None and not channel.closed:
                reply = await channel.call(method, *args)
            else:
                reply = await host.unless_lost(getattr(host.actor, method).remote(*args))
            return reply
        finally:
            host.in_flight -= 1

    # ------------------------------------------------------------------ sessions

    async def call_on(self, host: Host, session_id: str, method: str, *args: Any) -> Any:
        """Call ``method`` on ``host``, which holds ``session_id`` (410 once it is lost)."""
        self.check_session_host(session_id, host)
        try:
            reply = await self._send(host, method, *args)
        except (RayActorError, ChannelClosedError, HostLostError) as exc:
            self._lose(host, _why_lost(exc))
            self.check_session_host(session_id, host)
            raise
        self._answered(host, "session")
        return reply.unwrap()

    @staticmethod
    def check_session_host(session_id: str, host: Host) -> None:
        if host.state in (HostState.LOST, HostState.DRAINED, HostState.FAILED):
            raise SessionLostError(
                f"session {session_id!r} was on host {host.name}, which is {host.state.value} "
                f"({host.reason}); its workspace is gone: start a new session"
            )

    # ------------------------------------------------------------------ metrics

    async def metrics(self) -> bytes:
        """Every healthy host's metrics with its ``host`` label, and the router's own.

        The router's: calls routed per host and kind, hosts per state, the queue per
        class and its bound, autoscale requests, its 429s. A host that does not answer within its
        heartbeat allowance is left out of this scrape.
        """
        if self.scheduler_stats is not None:
            for klass, length in self.scheduler_stats().queued.items():
                QUEUED.labels(klass).set(length)
        QUEUE_MAX.set(self.config.queue.max_waiting)
        answered, _ = await self.ask_healthy("metrics", lambda actor: actor.metrics.remote())
        return metrics.merge(metrics.exposition(), answered)

    @property
    def answer_timeout_s(self) -> float:
        """How long a healthy host may take to answer a read (metrics, audit): the time
        after which its missed heartbeats take it out of rotation."""
        return self.heartbeat_s * self.config.health.missed_heartbeats

    async def ask_healthy(
        self, what: str, call: Callable[[Any], Any]
    ) -> tuple[dict[str, Any], list[str]]:
        """``call`` on every healthy host's agent at once, each given :attr:`answer_timeout_s`:
        the answers by host name, and the names of the hosts that gave none (each logged as
        giving no ``what``)."""
        hosts = self.healthy()
        answers = await asyncio.gather(
            *(asyncio.wait_for(call(h.actor), self.answer_timeout_s) for h in hosts),
            return_exceptions=True,
        )
        answered: dict[str, Any] = {}
        silent: list[str] = []
        for host, answer in zip(hosts, answers, strict=True):
            if isinstance(answer, BaseException):
                logger.warning("fleet host %s gave no %s: %r", host.name, what, answer)
                silent.append(host.name)
            else:
                answered[host.name] = answer
        return answered, silent

    # ------------------------------------------------------------------ operations

    def host_named(self, name: str) -> Host:
        for host in self.hosts.values():
            if name in (host.name, host.node_id, host.node_id[:12]) or host.name.startswith(name):
                return host
        raise NotFoundError(
            f"no fleet host {name!r}; hosts: {sorted(h.name for h in self.hosts.values())}"
        )

    async def drain(self, name: str, timeout_s: float) -> HostView:
        """Take ``name`` out of rotation, let its work finish, release its containers, then
        stop its agent: the node's ``sandbox_host`` goes back to Ray, and this router starts
        no agent there again."""
        host = self.host_named(name)
        if host.state in (HostState.DRAINED, HostState.LOST, HostState.FAILED):
            return self.view(host)
        host.state, host.reason = HostState.DRAINING, "draining"
        self._count()
        try:
            status: HostStatus = await host.actor.drain.remote(timeout_s)
        except RayActorError as exc:
            self._lose(host, f"actor died ({type(exc).__name__})")
            return self.view(host)
        host.status, host.last_beat = status, time.monotonic()
        host.state, host.reason = HostState.DRAINED, "drained: its agent is stopped"
        if host.channel is not None:
            await host.channel.close()
        host.fail_calls(f"host {host.name} was drained")
        try:
            ray.kill(host.actor, no_restart=True)  # gives the node's sandbox_host back
        except Exception as exc:  # already gone: nothing holds the node
            logger.warning("fleet host %s: stopping its drained agent: %s", host.name, exc)
        logger.info("fleet host %s drained; its agent is stopped", host.name)
        self._count()
        return self.view(host)

    def view(self, host: Host) -> HostView:
        groups = host.status.pool.groups if host.status and host.status.pool else []
        per_group: dict[str, HostGroup] = {}
        for g in groups:  # a policy's groups (one per image) summed
            seen = per_group.get(g.policy)
            per_group[g.policy] = HostGroup(
                policy=g.policy,
                idle=g.idle + (seen.idle if seen else 0),
                busy=g.busy + (seen.busy if seen else 0),
                starting=g.starting + (seen.starting if seen else 0),
                warm_target=g.warm_target + (seen.warm_target if seen else 0),
            )
        return HostView(
            name=host.name,
            node_id=host.node_id,
            owner=host.status.owner if host.status else "",
            state=host.state,
            reason=host.reason,
            in_flight=host.in_flight,
            sessions=host.status.sessions if host.status else 0,
            idle=sum(g.idle for g in groups),
            busy=sum(g.busy for g in groups),
            starting=sum(g.starting for g in groups),
            waiting=host.status.pool.waiting if host.status and host.status.pool else 0,
            routed=host.routed,
            seconds_since_heartbeat=round(time.monotonic() - host.last_beat, 3),
            groups=sorted(per_group.values(), key=lambda g: g.policy),
        )

    def status(self) -> FleetStatus:
        views = [self.view(h) for h in sorted(self.hosts.values(), key=lambda h: h.name)]
        stats = self.scheduler_stats() if self.scheduler_stats is not None else None
        return FleetStatus(
            hosts=views,
            healthy=len(self.healthy()),
            scheduler=stats,
        )
