"""``Fleet.connect()``: the fleet for code that runs inside the Ray cluster, without an HTTP hop.

A trainer whose workers are Ray actors judges, evaluates and holds sessions on the
fleet's hosts through the same router the API uses::

    fleet = await Fleet.connect()
    result = await fleet.judge(JudgeRequest(code=..., tests=...))
    lines, summary = await fleet.evaluate(EvaluateRequest(items=[...]))
    session = await fleet.create_session(SessionSpec())
    await fleet.close()
"""

from __future__ import annotations

from pathlib import Path

from sandbox.core.sessions import Command, SessionInfo, SessionSpec
from sandbox.fleet.facade import FleetPlatform
from sandbox.fleet.status import FleetStatus
from sandbox.judge.batches import EvaluateRequest, ItemLine, Summary, parse_lines
from sandbox.judge.judge import JudgeRequest, JudgeResult
from sandbox.results import ExecResult
from sandbox.service.platform import DEFAULT_POLICIES_DIR, PlatformSettings

DEFAULT_TENANT = "trainer"


class Fleet:
    """Judge, evaluate and run sessions on the fleet as one tenant."""

    def __init__(self, platform: FleetPlatform, tenant: str = DEFAULT_TENANT) -> None:
        self.platform = platform
        self.tenant = tenant

    @classmethod
    async def connect(
        cls,
        address: str = "auto",
        *,
        policies_dir: Path = DEFAULT_POLICIES_DIR,
        tenant: str = DEFAULT_TENANT,
    ) -> Fleet:
        """Join the cluster (a no-op inside a Ray worker) and find its host agents."""
        platform = FleetPlatform(PlatformSettings(policies_dir=policies_dir, warm=[]), address)
        await platform.start()
        return cls(platform, tenant)

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        """One submission against its hidden tests; an infra failure is reward ``None``.

        It runs in ``request.priority_class``, else the tenant's default class for a run.
        """
        with self.platform.admission.bound(self.tenant, request.priority_class, "run"):
            return await self.platform.judge.judge(request, tenant=self.tenant)

    async def evaluate(self, request: EvaluateRequest) -> tuple[list[ItemLine], Summary]:
        """A batch, each item placed on a host: its lines in index order, and the summary.

        Its items run in ``request.priority_class``, else the tenant's default for a batch.
        """
        with self.platform.admission.bound(self.tenant, request.priority_class, "batch"):
            started = self.platform.evaluator.start(request, tenant=self.tenant)
        lines = [line async for line in started]
        return parse_lines(lines)

    async def create_session(self, spec: SessionSpec) -> SessionInfo:
        """A session on one host; its ``priority_class`` is checked (422 / 403) only."""
        self.platform.admission.config.resolve_class(self.tenant, spec.priority_class, "session")
        return (await self.platform.sessions.create(spec, tenant=self.tenant)).info()

    async def exec(self, session_id: str, command: Command) -> ExecResult:
        return await self.platform.sessions.exec(session_id, command, tenant=self.tenant)

    async def close_session(self, session_id: str) -> None:
        await self.platform.sessions.close(session_id, tenant=self.tenant)

    def status(self) -> FleetStatus:
        return self.platform.fleet_status()

    async def close(self) -> None:
        """Stop watching the hosts (their agents and pools stay up)."""
        await self.platform.close()
