"""The fleet behind the single-host platform's interface, so every endpoint works unchanged.

:class:`FleetPlatform` has what the API's routers use of a
:class:`~sandbox.service.platform.Platform` (``keyring``, ``execution``,
``judge``, ``evaluator``, ``sessions``, ``pool``, ``audit``, ``images``,
``policy_names``), each backed by the :class:`~sandbox.fleet.router.Router`.
Requests are validated here against the same policy files the hosts load (a
bad request is refused before it travels); runs, judgements and batch items
are placed one by one on the hosts; a session's calls go to its host.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import ray

from sandbox.core.execution import ExecutionService, RunRequest, decode_files, note_status
from sandbox.core.pool import GroupStatus, Pool, PoolStatus
from sandbox.core.sessions import Command, DirEntry, SessionInfo, SessionSpec
from sandbox.errors import (
    ContainerLostError,
    NotFoundError,
    SandboxTimeoutError,
    UnsupportedError,
)
from sandbox.fleet.admission import Admission
from sandbox.fleet.config import FleetConfig
from sandbox.fleet.router import NAMESPACE, FleetStatus, Host, Router
from sandbox.judge.batches import Evaluator
from sandbox.judge.judge import Judge, JudgeRequest, JudgeResult, note_verdict, unjudged
from sandbox.policy import Policy, load_policy_dir, stamp_versions
from sandbox.results import ExecResult, ExecStatus
from sandbox.service.platform import ImageNotBuiltError, PlatformSettings
from sandbox.service.tenants import Keyring
from sandbox.telemetry.audit import AuditRecord

logger = logging.getLogger(__name__)


def connect(address: str) -> None:
    """Join the Ray cluster at ``address``: ``auto`` ($RAY_ADDRESS, else the local cluster)
    or ``ray://HOST:10001``; a no-op inside a Ray worker or an already connected driver."""
    if ray.is_initialized():
        return
    target = (os.environ.get("RAY_ADDRESS") or "auto") if address == "auto" else address
    ray.init(
        address=target, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING
    )


class FleetPool:
    """``status()`` of the whole fleet: each (policy, image) group summed over healthy hosts."""

    def __init__(self, router: Router) -> None:
        self.router = router

    def status(self) -> PoolStatus:
        groups: dict[tuple[str, str, str, bool], dict[str, int]] = {}
        waiting = max_waiting = 0
        identity = {"policy", "image", "digest", "retiring"}
        for host in self.router.healthy():
            pool = host.status.pool if host.status else None
            if pool is None:
                continue
            waiting += pool.waiting
            max_waiting += pool.max_waiting
            for group in pool.groups:
                key = (group.policy, group.image, group.digest, group.retiring)
                counts = groups.setdefault(key, {})
                for name, value in group.model_dump(exclude=identity).items():
                    counts[name] = counts.get(name, 0) + value
        return PoolStatus(
            groups=[
                GroupStatus(policy=policy, image=image, digest=digest, retiring=retiring, **counts)
                for (policy, image, digest, retiring), counts in sorted(groups.items())
            ],
            waiting=waiting,
            max_waiting=max_waiting,
        )


class FleetExecution(ExecutionService):
    """Runs go to a host once admitted; policies and images are checked here first."""

    def __init__(
        self,
        router: Router,
        admission: Admission,
        policies: Mapping[str, Policy],
        resolve_image: Any,
        pool: FleetPool,
    ) -> None:
        # The fleet's pool view answers status() only: nothing leases from it here.
        super().__init__(cast(Pool, pool), policies, resolve_image)
        self.router = router
        self.admission = admission

    async def run_program(
        self, request: RunRequest, *, tenant: str
    ) -> tuple[ExecResult | None, ExecResult | None]:
        """The build's and the run's results from a host; a host lost twice is ``infra_error``."""
        self.policy(request.policy)
        try:
            async with self.admission.slot(tenant):
                built, ran = await self.router.call(
                    "run_program", request, tenant, policy=request.policy, kind="run", tenant=tenant
                )
        except ContainerLostError as exc:
            built, ran = None, ExecResult(status=ExecStatus.INFRA_ERROR, error=str(exc))
        note_status(ExecStatus.COMPILE_ERROR if ran is None else ran.status)  # as a host notes it
        return built, ran


class FleetJudge(Judge):
    """Judgements go to a host; a request is planned (validated) here first."""

    def __init__(self, execution: FleetExecution) -> None:
        super().__init__(execution)
        self.router = execution.router
        self.admission = execution.admission

    async def judge(self, request: JudgeRequest, *, tenant: str) -> JudgeResult:
        """A host's verdict; hosts lost under it make it unjudged (reward None, ``infra``)."""
        started = time.perf_counter()
        self.plan(request)
        try:
            async with self.admission.slot(tenant):
                result: JudgeResult = await self.router.call(
                    "judge", request, tenant, policy=request.policy, kind="judge", tenant=tenant
                )
        except ContainerLostError as exc:
            result = unjudged(request, str(exc), started)
        note_verdict(result)  # on this call, as the host noted it on its own
        return result


@dataclass
class _Remote:
    """A session as the router knows it: whose, where, and its info at the last call."""

    tenant: str
    host: Host
    last: SessionInfo

    def info(self) -> SessionInfo:
        return self.last


class FleetSessions:
    """Sessions on the hosts: each lives on the host that created it (snapshots too)."""

    files = staticmethod(decode_files)

    def __init__(self, router: Router) -> None:
        self.router = router
        self._sessions: dict[str, _Remote] = {}
        self._snapshots: dict[str, Host] = {}

    async def create(self, spec: SessionSpec, *, tenant: str) -> _Remote:
        if spec.environment is not None:
            raise UnsupportedError(
                "a fleet does not route task environments (an environment is built on one "
                "host); run sessions in built environments against a single-host service"
            )
        if spec.from_snapshot is not None:
            host = self._snapshots.get(spec.from_snapshot)
            if host is None:
                raise NotFoundError(f"no snapshot {spec.from_snapshot!r}")
            info = await self.router.call_on(
                host, spec.from_snapshot, "session_create", spec, tenant
            )
        else:
            host, info = await self.router.placed_call(
                "session_create", spec, tenant, policy=spec.policy, kind="session", tenant=tenant
            )
        session = self._sessions[info.id] = _Remote(tenant, host, info)
        return session

    def get(self, session_id: str, *, tenant: str) -> _Remote:
        session = self._sessions.get(session_id)
        if session is None or session.tenant != tenant:
            raise NotFoundError(f"no session {session_id!r}")
        self.router.check_session_host(session_id, session.host)
        return session

    def sessions_of(self, tenant: str) -> list[_Remote]:
        return [s for s in self._sessions.values() if s.tenant == tenant]

    async def _on(self, session_id: str, tenant: str, method: str, *args: Any) -> Any:
        session = self.get(session_id, tenant=tenant)
        try:
            return await self.router.call_on(session.host, session_id, method, *args)
        except NotFoundError:  # closed on its host (idle too long), or its host is gone
            self._sessions.pop(session_id, None)
            raise

    async def exec(self, session_id: str, command: Command, *, tenant: str) -> ExecResult:
        result, info = await self._on(
            session_id, tenant, "session_exec", session_id, command, tenant
        )
        self._sessions[session_id].last = info
        return cast(ExecResult, result)

    async def write_files(
        self, session_id: str, files: Mapping[str, bytes], *, tenant: str
    ) -> None:
        args = ("write_files", session_id, tenant, dict(files))
        await self._on(session_id, tenant, "session_call", *args)

    async def read_file(self, session_id: str, path: str, *, tenant: str) -> bytes:
        args = ("read_file", session_id, tenant, path)
        return cast(bytes, await self._on(session_id, tenant, "session_call", *args))

    async def list_dir(self, session_id: str, path: str, *, tenant: str) -> list[DirEntry]:
        args = ("list_dir", session_id, tenant, path)
        return cast(list[DirEntry], await self._on(session_id, tenant, "session_call", *args))

    async def snapshot(self, session_id: str, *, tenant: str) -> str:
        args = ("snapshot", session_id, tenant)
        snapshot_id = cast(str, await self._on(session_id, tenant, "session_call", *args))
        self._snapshots[snapshot_id] = self._sessions[session_id].host
        return snapshot_id

    async def close(self, session_id: str, *, tenant: str) -> None:
        if session_id in self._sessions:
            await self._on(session_id, tenant, "session_call", "close", session_id, tenant)
            self._sessions.pop(session_id, None)


class FleetAudit:
    """The hosts' audit logs read as one (each host keeps its own)."""

    def __init__(self, router: Router) -> None:
        self.router = router

    async def query(self, *, limit: int = 100, **filters: Any) -> list[AuditRecord]:
        """The healthy hosts' records, asked of all at once, newest first.

        A host that does not answer within its heartbeat allowance (a frozen one) is named
        in a :class:`SandboxTimeoutError` (504): a log missing a host's records is never
        answered as the whole, nor waited for without end. Once its heartbeats have taken
        it out of rotation, its records are left out and the query answers again.
        """
        answered, silent = await self.router.ask_healthy(
            "audit records", lambda actor: actor.audit_query.remote(limit=limit, **filters)
        )
        if silent:
            raise SandboxTimeoutError(
                f"fleet host(s) {', '.join(silent)} did not answer the audit query within "
                f"{self.router.answer_timeout_s:g} s, so the answer would miss their records; a "
                "host that stops answering is out of rotation after "
                f"{self.router.config.health.missed_heartbeats} missed heartbeats (its records "
                "are then left out): retry"
            )
        records = [r for reply in answered.values() for r in reply.unwrap()]
        return sorted(records, key=lambda r: r.time, reverse=True)[:limit]


class FleetPlatform:
    """A Platform-compatible facade over the fleet; ``start`` then ``close``."""

    def __init__(
        self,
        settings: PlatformSettings,
        address: str = "auto",
        config: FleetConfig | None = None,
    ) -> None:
        self.settings = settings
        self.address = address
        self.config = config or FleetConfig()
        self.policies = load_policy_dir(settings.policies_dir)
        self.versions = stamp_versions(self.policies)
        self.keyring = Keyring.from_environment(settings.keys_file)
        self.router = Router(settings, self.config)
        self.admission = Admission(self.config, self.router.require_healthy)
        self.router.on_change = lambda: self.admission.scheduler.set_capacity(self.router.slots())
        self.router.scheduler_stats = self.admission.scheduler.stats
        self.pool = FleetPool(self.router)
        self.execution = FleetExecution(
            self.router, self.admission, self.policies, self.image, self.pool
        )
        self.judge = FleetJudge(self.execution)
        self.evaluator = Evaluator(self.judge)
        self.sessions = FleetSessions(self.router)
        self.audit = FleetAudit(self.router)

    @property
    def images(self) -> dict[str, str]:
        """Image tags the healthy hosts have built."""
        found: dict[str, str] = {}
        for host in self.router.healthy():
            found.update(host.status.images if host.status else {})
        return found

    def image(self, name: str) -> str:
        tag = self.images.get(name)
        if tag is None:
            raise ImageNotBuiltError(
                f"no healthy host of the fleet has image {name!r} built; build it there with "
                "`sandbox images build`"
            )
        return tag

    async def start(self) -> None:
        await asyncio.to_thread(connect, self.address)
        await self.router.start()
        logger.info("fleet ready: %s", ", ".join(h.name for h in self.router.healthy()))

    async def close(self) -> None:
        await self.evaluator.close()
        await self.router.close()

    def policy_names(self) -> list[str]:
        return sorted(self.policies)

    def pool_status(self, viewer: str | None = None) -> PoolStatus:
        """The fleet's pool groups, and each policy with its digest and load time (a fleet
        runs no built environments, so no ids to keep from ``viewer``)."""
        return self.pool.status().model_copy(update={"policies": list(self.versions.values())})

    async def audit_query(self, **filters: Any) -> list[AuditRecord]:
        """Audit records of every healthy host, newest first (``AuditLog.query``'s filters)."""
        return await self.audit.query(**filters)

    async def metrics(self) -> bytes:
        """The hosts' metrics, each with its ``host`` label, and the router's own."""
        return await self.router.metrics()

    def fleet_status(self) -> FleetStatus:
        return self.router.status()
