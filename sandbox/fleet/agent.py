"""The host agent: one long-lived Ray actor per node that owns the node's single-host platform.

The router creates it pinned to its node (the ``sandbox_host`` resource and a
hard node affinity) and calls its async methods; each runs on the node's
:class:`~sandbox.service.platform.Platform` (pool, judge, sessions, reaper)
exactly as the single-host service would. Its containers carry this actor
process's owner label: the platform's start-up sweep removes only those of dead
owners, and the watchdog the platform spawns removes this agent's when its
process dies, however it dies. Every answer is a :class:`~sandbox.fleet.wire.Reply`.
Runs and judgements also come on the agent's direct channel
(:mod:`sandbox.fleet.channel`), which skips the cost of a Ray call.

This module imports no Ray: ``ray.remote(HostAgent)`` is applied by the router.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from sandbox.core.execution import RunRequest
from sandbox.core.pool import PoolStatus
from sandbox.core.sessions import Command, SessionInfo, SessionSpec
from sandbox.errors import NotFoundError
from sandbox.fleet.channel import ChannelServer
from sandbox.fleet.config import WarmSettings
from sandbox.fleet.warm import ElasticWarm, WarmSizer
from sandbox.fleet.wire import Reply
from sandbox.judge.judge import JudgeRequest
from sandbox.service.platform import Platform, PlatformSettings
from sandbox.telemetry import metrics

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The code an agent answers new work with once it drains (the router places it elsewhere).
DRAINING = "host_draining"
DEFAULT_DRAIN_TIMEOUT_S = 300.0
_DRAIN_POLL_S = 0.2


class HostStatus(BaseModel):
    """One host's state and load, as a heartbeat reports it."""

    node_id: str
    name: str
    owner: str
    started: bool
    draining: bool
    released: bool
    slots: int
    in_flight: int
    sessions: int
    pool: PoolStatus | None
    images: dict[str, str]
    policies: list[str]
    reported_at: float


def run_at_node_niceness() -> str:
    """Give every thread of this process its node's niceness (the raylet's, its parent's).

    Ray starts its workers 15 nicer than the raylet (``worker_niceness``), fit for batch
    work; a host agent at +15 waits behind every ordinary process on a busy node while its
    containers (children of the container runtime, never niced) sit idle for it. Threads
    started later inherit the value. Says what it did, or why it could not.
    """
    node = os.getpriority(os.PRIO_PROCESS, os.getppid())
    raised = 0
    for tid in map(int, os.listdir("/proc/self/task")):
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) > node:
                os.setpriority(os.PRIO_PROCESS, tid, node)
                raised += 1
        except ProcessLookupError:
            continue  # the thread ended
        except PermissionError:
            return (
                f"its threads stay nicer than the node's {node} (Ray's worker niceness): "
                "raising them needs CAP_SYS_NICE or an RLIMIT_NICE of at least "
                f"{20 - node}, else start the node with RAY_worker_niceness=0"
            )
    return f"{raised} threads at the node's niceness {node}"


def agent_settings(settings: PlatformSettings, node_id: str) -> PlatformSettings:
    """The platform settings for the agent on ``node_id``: its own audit log beside the others'."""
    audit = settings.audit_path
    return settings.model_copy(
        update={"audit_path": audit.with_name(f"{audit.stem}-{node_id[:12]}{audit.suffix}")}
    )


class HostAgent:
    """The node's platform behind async methods: ``start`` once, then calls, then ``drain``."""

    def __init__(
        self,
        settings: Mapping[str, Any],
        node_id: str,
        warm: Mapping[str, Any] | None = None,
        address: str = "127.0.0.1",
    ) -> None:
        self.node_id = node_id
        self._channel = ChannelServer(self, address)
        self.sizer = WarmSizer(WarmSettings.model_validate(warm or {}))
        self.name = f"{socket.gethostname()}/{node_id[:8]}"
        self.settings = agent_settings(PlatformSettings.model_validate(settings), node_id)
        self.platform: Platform | None = None
        self._starting: asyncio.Lock | None = None
        self._in_flight = 0
        self._draining = False
        self._released = False

    async def start(self) -> Reply:
        """Build and start the platform (idempotent); an error reply if it cannot start."""
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self.platform is not None:
                return Reply()
            logger.info("host agent %s: %s", self.name, run_at_node_niceness())
            try:
                platform = Platform(self.settings, refill=ElasticWarm(self.sizer, self._slots))
                await platform.start()
            except Exception as exc:
                return Reply.failure(exc, self.name)
            self.platform = platform
            logger.info("host agent %s ready (owner %s)", self.name, platform.backend.owner)
            return Reply()

    async def channel(self) -> Reply:
        """The port and token of this agent's direct channel (listening from the first call)."""
        try:
            return Reply(value=(await self._channel.start(), self._channel.token))
        except OSError as exc:
            return Reply.failure(exc, self.name)

    async def status(self) -> HostStatus:
        """This host's load: pool groups (idle warm, busy, starting, waiting), calls in flight.

        Each heartbeat also resizes the warm pools (:meth:`resize`).
        """
        platform = self.platform
        live = platform is not None and not self._released
        if live:
            self.resize()
        return HostStatus(
            node_id=self.node_id,
            name=self.name,
            owner=platform.backend.owner if platform is not None else "",
            started=platform is not None,
            draining=self._draining,
            released=self._released,
            slots=self._slots() if live else 0,
            in_flight=self._in_flight,
            sessions=platform.sessions.count if live and platform else 0,
            pool=platform.pool.status() if live and platform else None,
            images=dict(platform.images) if platform is not None else {},
            policies=list(platform.policy_names()) if platform is not None else [],
            reported_at=time.time(),
        )

    def _slots(self) -> int:
        """Execution slots of this host: the largest pool of its policies."""
        platform = self.platform
        policies = platform.policies.values() if platform is not None else ()
        return max((p.pool.max for p in policies), default=0)

    def resize(self) -> None:
        """Set each group's warm target from its measured arrival rate and start time
        (Little's law, within the fleet's floor and the policy's ``max``): a burst raises
        it, idleness lowers it."""
        assert self.platform is not None
        pool, policies = self.platform.pool, self.platform.policies
        for group in pool.status().groups:
            policy = policies.get(group.policy)
            if policy is not None:
                target = self.sizer.target(group.policy, policy.pool.max)
                if target != group.warm_target:
                    pool.set_warm_target(group.image, policy, target)

    async def _serve(self, work: Callable[[Platform], Awaitable[T]], *, new: bool = True) -> Reply:
        """Run ``work`` on the platform and wrap the outcome; ``new`` work is refused in a drain."""
        if self.platform is None or self._released or (new and self._draining):
            return Reply(code=DRAINING, message=f"host {self.name} takes no new work")
        self._in_flight += 1
        try:
            return Reply(value=await work(self.platform))
        except Exception as exc:
            return Reply.failure(exc, self.name)
        finally:
            self._in_flight -= 1

    # ------------------------------------------------------------------ judgements

    async def run_program(self, request: RunRequest, tenant: str) -> Reply:
        self.sizer.record_arrival(request.policy)
        return await self._serve(lambda p: p.execution.run_program(request, tenant=tenant))

    async def judge(self, request: JudgeRequest, tenant: str) -> Reply:
        self.sizer.record_arrival(request.policy)
        return await self._serve(lambda p: p.judge.judge(request, tenant=tenant))

    # ------------------------------------------------------------------ sessions

    async def session_create(self, spec: SessionSpec, tenant: str) -> Reply:
        async def create(p: Platform) -> SessionInfo:
            return (await p.sessions.create(spec, tenant=tenant)).info()

        return await self._serve(create)

    async def session_exec(self, session_id: str, command: Command, tenant: str) -> Reply:
        async def run(p: Platform) -> tuple[Any, SessionInfo]:
            result = await p.sessions.exec(session_id, command, tenant=tenant)
            return result, p.sessions.get(session_id, tenant=tenant).info()

        return await self._serve(run, new=False)

    async def session_call(self, method: str, session_id: str, tenant: str, *args: Any) -> Reply:
        """``write_files``, ``read_file``, ``list_dir``, ``snapshot`` or ``close`` of a session."""
        if method not in ("write_files", "read_file", "list_dir", "snapshot", "close"):
            return Reply.failure(NotFoundError(f"no session call {method!r}"), self.name)

        async def call(p: Platform) -> Any:
            return await getattr(p.sessions, method)(session_id, *args, tenant=tenant)

        return await self._serve(call, new=False)

    async def sessions_of(self, tenant: str) -> Reply:
        async def listed(p: Platform) -> list[SessionInfo]:
            return [s.info() for s in p.sessions.sessions_of(tenant)]

        return await self._serve(listed, new=False)

    # ------------------------------------------------------------------ observability

    async def audit_query(self, **filters: Any) -> Reply:
        return await self._serve(lambda p: p.audit_query(**filters), new=False)

    async def metrics(self) -> bytes:
        """This host's Prometheus text (executions, judgements, pool)."""
        platform = self.platform
        if platform is None or self._released:
            return metrics.exposition()
        return await platform.metrics()

    # ------------------------------------------------------------------ drain

    async def drain(self, timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S) -> HostStatus:
        """Take no new work, let what runs (and open sessions) finish, then release every container.

        Sessions still open after ``timeout_s`` are closed.
        """
        self._draining = True
        deadline = time.monotonic() + timeout_s
        platform = self.platform
        while platform is not None and time.monotonic() < deadline:
            if self._in_flight == 0 and not platform.sessions.count:
                break
            await asyncio.sleep(_DRAIN_POLL_S)
        if platform is not None and not self._released:
            self._released = True
            with contextlib.suppress(Exception):
                await platform.close()
            await self._channel.close()
        logger.info("host agent %s drained and released", self.name)
        return await self.status()
