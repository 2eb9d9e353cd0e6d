"""Episodes: one attempt at one task, driven tool call by tool call from outside.

The way in for RL trainers (the embedded trainer's multi-turn rollouts, TRL
environments, verl tools, OpenEnv): :meth:`EpisodeManager.open` starts an
episode of a task in its own sandbox session, :meth:`~EpisodeManager.step`
runs one tool call there (the evaluator's :class:`~.agents.Tools`: the same
tools, budget and truncation as an evaluated agent), and
:meth:`~EpisodeManager.judge` runs the task's hidden tests and reads the
verdict as the evaluator does (:mod:`.judging`), so a pass means the same in
training and in evaluation. Then the session is closed.

Sessions are copies of the task's snapshot: the first episode of a task (for a
tenant) lays its files and runs its ``setup``, then snapshots the workspace;
every later episode starts from that snapshot, from the warm pool. The hidden
tests are never in a session before it is judged.

Rewards: 1.0 for a pass and 0.0 otherwise (a task judged by a reward file gives
that reward); ``None`` when the platform failed (the sandbox died, the tests
could not run): such an episode carries no verdict and must be dropped, never
scored 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Final

from sandbox.core.sessions import SessionManager
from sandbox.errors import InvalidRequestError, NotFoundError, QuotaError, SandboxError
from sandbox.results import EpisodeInfo, EpisodeResult, StepResult

from .agents import TOOL_SCHEMAS, AgentError, AgentTimeout, BudgetExhausted, Tools
from .judging import Outcome, SetupFailed, judge_session, start_task_session
from .tasks import Task

__all__ = [
    "EPISODE_TOOLS",
    "EpisodeInfo",
    "EpisodeManager",
    "EpisodeResult",
    "StepResult",
]

logger = logging.getLogger(__name__)

EPISODE_TOOLS: Final = [s for s in TOOL_SCHEMAS if s["function"]["name"] != "list_dir"]
"""The tools an episode offers (OpenAI function schemas): shell, read_file, write_file, done."""
MAX_EPISODES_PER_TENANT: Final = 1024
JUDGED_KEPT_S: Final = 3600.0
"""How long a judged episode's result stays readable."""


@dataclass
class _Episode:
    id: str
    tenant: str
    task: Task
    session_id: str
    tools: Tools
    started: float
    record: dict[str, Any] = field(default_factory=dict)
    result: EpisodeResult | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def info(self) -> EpisodeInfo:
        return EpisodeInfo(
            id=self.id,
            task=self.task.id,
            instruction=self.task.config.instruction,
            session_id=self.session_id,
            steps=self.tools.steps,
            max_steps=self.tools.max_steps,
            time_left_s=round(max(0.0, self.tools.time_left), 3),
            done=self.done,
            tools=EPISODE_TOOLS,
        )

    @property
    def done(self) -> bool:
        tools = self.tools
        spent = tools.exhausted or tools.timed_out or tools.steps_left <= 0
        return tools.finished or spent or self.result is not None


class EpisodeManager:
    """Open episodes of tasks, step them, judge them; sessions copied from task snapshots."""

    def __init__(self, sessions: SessionManager) -> None:
        self.sessions = sessions
        self._episodes: dict[str, _Episode] = {}
        self._snapshots: dict[tuple[str, str], str] = {}
        self._snapshot_locks: dict[tuple[str, str], asyncio.Lock] = {}

    # ------------------------------------------------------------------ lifecycle

    async def open(
        self,
        task: Task,
        *,
        tenant: str,
        max_steps: int | None = None,
        timeout_s: float | None = None,
        max_output_chars: int | None = None,
    ) -> EpisodeInfo:
        """Start an episode of ``task``: a session from its snapshot, under its agent budget.

        ``max_steps`` and ``timeout_s`` may only lower the task's own budget;
        ``max_output_chars`` caps each observation (stdout and stderr each, a file read).
        """
        self._reap()
        config = task.config
        if sum(1 for e in self._episodes.values() if e.tenant == tenant) >= (
            MAX_EPISODES_PER_TENANT
        ):
            raise QuotaError(f"tenant {tenant!r} has {MAX_EPISODES_PER_TENANT} episodes open")
        steps = min(max_steps or config.agent.max_steps, config.agent.max_steps)
        budget = min(timeout_s or config.agent.timeout_s, config.agent.timeout_s)
        if max_output_chars is not None and max_output_chars < 16:
            raise InvalidRequestError("max_output_chars must be at least 16")
        record: dict[str, Any] = {}
        try:
            session_id = await self._start(task, tenant, record)
        except SetupFailed as exc:
            raise InvalidRequestError(f"{task.path}: {exc}") from exc
        session = self.sessions.get(session_id, tenant=tenant)
        tools = Tools(
            self.sessions,
            session_id,
            tenant=tenant,
            max_steps=steps,
            timeout_s=budget,
            command_wall_s=session.policy.resources.wall_time_s,
            max_output_chars=max_output_chars,
        )
        episode = _Episode(
            secrets.token_urlsafe(12), tenant, task, session_id, tools, time.monotonic(), record
        )
        self._episodes[episode.id] = episode
        return episode.info()

    async def _start(self, task: Task, tenant: str, record: dict[str, Any]) -> str:
        """A session for one episode: a copy of the task's snapshot, made on first use."""
        key = (tenant, task.digest)
        lock = self._snapshot_locks.setdefault(key, asyncio.Lock())
        async with lock:
            snapshot = self._snapshots.get(key)
            if snapshot is None:
                session_id = await self._fresh(task, tenant, record)
                try:
                    self._snapshots[key] = await self.sessions.snapshot(session_id, tenant=tenant)
                except (InvalidRequestError, QuotaError) as exc:
                    # Too big to snapshot, or the tenant's snapshot quota: fresh sessions.
                    logger.info("episodes of %s start fresh: %s", task.id, exc)
                return session_id
        try:
            return await start_task_session(
                self.sessions, task, tenant=tenant, record=record, from_snapshot=snapshot
            )
        except NotFoundError:  # the snapshot expired or was deleted: make it again
            self._snapshots.pop(key, None)
            return await self._start(task, tenant, record)

    async def _fresh(self, task: Task, tenant: str, record: dict[str, Any]) -> str:
        try:
            return await start_task_session(self.sessions, task, tenant=tenant, record=record)
        except BaseException:
            session_id = record.pop("_session", None)
            if session_id is not None:
                with contextlib.suppress(SandboxError):
                    await self.sessions.close(session_id, tenant=tenant)
            raise

    def get(self, episode_id: str, *, tenant: str) -> EpisodeInfo:
        return self._get(episode_id, tenant).info()

    def _get(self, episode_id: str, tenant: str) -> _Episode:
        episode = self._episodes.get(episode_id)
        if episode is None or episode.tenant != tenant:
            raise NotFoundError(f"no episode {episode_id!r}")
        return episode

    async def step(
        self, episode_id: str, tool: str, arguments: dict[str, Any] | str | None, *, tenant: str
    ) -> StepResult:
        """Run one tool call; the policy's mistakes come back as ``error:`` observations."""
        episode = self._get(episode_id, tenant)
        async with episode.lock:
            tools = episode.tools
            if episode.done:
                observation = "error: the episode is over; no more tool calls"
            else:
                try:
                    observation = await tools.call(tool, arguments)
                except BudgetExhausted as exc:
                    observation = f"error: {exc}; the episode is over"
                except AgentTimeout as exc:
                    observation = f"error: {exc}; the episode is over"
                except AgentError as exc:
                    observation = f"error: {exc}"
                except SandboxError as exc:  # the platform failed, not the policy: no verdict
                    logger.warning("episode %s: the sandbox failed: %s", episode_id, exc)
                    episode.record["error"] = f"the sandbox failed mid-episode: {exc}"
                    episode.result = self._result(episode, Outcome.INFRA_ERROR)
                    await self._close_session(episode)
                    observation = "error: the sandbox failed; the episode has no verdict"
            return StepResult(
                observation=observation,
                done=episode.done,
                steps=tools.steps,
                steps_left=max(0, tools.steps_left),
            )

    async def judge(self, episode_id: str, *, tenant: str) -> EpisodeResult:
        """Run the hidden tests once and close the session; judging again returns the same."""
        episode = self._get(episode_id, tenant)
        async with episode.lock:
            if episode.result is not None:
                return episode.result
            await episode.tools.settle()
            verdict = await judge_session(
                self.sessions,
                episode.session_id,
                episode.task,
                tenant=tenant,
                record=episode.record,
            )
            episode.result = self._result(episode, verdict)
            await self._close_session(episode)
            return episode.result

    @staticmethod
    def _result(episode: _Episode, verdict: Outcome) -> EpisodeResult:
        tools, record = episode.tools, episode.record
        outcome = verdict
        if verdict is not Outcome.INFRA_ERROR:
            if tools.timed_out:
                outcome = Outcome.AGENT_TIMEOUT
            elif tools.exhausted:
                outcome = Outcome.BUDGET_EXHAUSTED
        tests = record.get("tests")
        reward: float | None
        if outcome is Outcome.INFRA_ERROR:
            reward = None
        elif episode.task.judged_by_reward and tests and tests.get("reward") is not None:
            reward = float(tests["reward"]) if outcome in (Outcome.PASSED, Outcome.FAILED) else 0.0
        else:
            reward = 1.0 if outcome is Outcome.PASSED else 0.0
        return EpisodeResult(
            episode=episode.id,
            task=episode.task.id,
            outcome=outcome.value,
            reward=reward,
            passed=None if outcome is Outcome.INFRA_ERROR else outcome is Outcome.PASSED,
            steps=tools.steps,
            tests=tests,
            error=record.get("error"),
            wall_s=round(time.monotonic() - episode.started, 4),
        )

    async def close(self, episode_id: str, *, tenant: str) -> None:
        """Forget the episode and close its session (judged or not)."""
        episode = self._get(episode_id, tenant)
        del self._episodes[episode_id]
        await self._close_session(episode)

    async def _close_session(self, episode: _Episode) -> None:
        with contextlib.suppress(SandboxError):
            await self.sessions.close(episode.session_id, tenant=episode.tenant)

    async def close_all(self) -> None:
        """Close every episode's session and drop the task snapshots' references."""
        episodes, self._episodes = list(self._episodes.values()), {}
        await asyncio.gather(*(self._close_session(e) for e in episodes))
        self._snapshots.clear()

    def _reap(self) -> None:
        """Forget episodes judged an hour ago; an unjudged one whose session was reaped
        (idle too long) or closed is judged ``infra_error`` (reward None)."""
        now = time.monotonic()
        for episode in list(self._episodes.values()):
            if episode.result is None:
                try:
                    self.sessions.get(episode.session_id, tenant=episode.tenant)
                except NotFoundError:
                    episode.record["error"] = "the episode's session is gone (reaped or closed)"
                    episode.result = self._result(episode, Outcome.INFRA_ERROR)
            elif now - episode.started > JUDGED_KEPT_S:
                del self._episodes[episode.id]

    def count(self, tenant: str | None = None) -> int:
        return sum(1 for e in self._episodes.values() if tenant in (None, e.tenant))
