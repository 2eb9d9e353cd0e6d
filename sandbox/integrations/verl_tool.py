"""verl's multi-turn tools over the service's episodes (``verl.tools.base_tool.BaseTool``).

verl's tool agent loop (``verl/experimental/agent_loop/tool_agent_loop.py``) offers
the policy the tools of a tool config YAML, one :class:`BaseTool` object per tool
name, and calls ``create(create_kwargs=...)``, ``execute(instance_id, arguments,
agent_data=...)`` (the observation, a step reward, metrics) and ``release(instance_id)``:
around every call in verl 0.9 (the release on PyPI), once per tool per trajectory in
verl's main branch (``agent_data.tool_instances``). :class:`SandboxEpisodeTool` is such
a tool for each of an episode's tools (``shell``, ``read_file``, ``write_file``,
``done``), and the tools of one trajectory (one ``agent_data``) share one episode
(``POST /v1/episodes``), opened at the trajectory's first call with the task its
dataset row names (``extra_info.tools_kwargs.<tool>.create_kwargs.task``, else the
config's ``task``).

The call that ends the episode (``done``, the step budget, the time budget) runs the
hidden tests, and its step reward is the episode's. The episode's record is kept in
``agent_data.extra_fields["sandbox_episode"]``, which verl passes to the reward
function's ``extra_info``; :func:`compute_score` reads the verdict there, and judges
an episode no call ended (the policy stopped calling tools) itself. Where verl releases
once per trajectory, that release judges and closes it instead.

The older SGLang rollout's calls (``create(request_id, **create_kwargs)``,
``execute(request_id, ...)``, ``calc_reward(request_id)``, ``release(request_id)``)
share an episode by their common instance id and work too.

verl is not a dependency: where ``verl`` imports, the class subclasses its
``BaseTool`` and answers its ``ToolResponse``; elsewhere structural equivalents of
the two stand in. See ``examples/verl/sandbox_tool_config.yaml`` and docs/verl.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import weakref
from dataclasses import dataclass, field
from typing import Any, Final
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field

from sandbox.client import DEFAULT_URL, AsyncSandboxClient, SandboxClient
from sandbox.errors import SandboxError
from sandbox.results import EpisodeInfo

__all__ = [
    "EPISODE_TOOL_NAMES",
    "VERL_AVAILABLE",
    "OpenAIFunctionToolSchema",
    "SandboxEpisodeTool",
    "ToolResponse",
    "compute_score",
]

logger = logging.getLogger(__name__)

EPISODE_TOOL_NAMES: Final = ("shell", "read_file", "write_file", "done")
VERDICT_KEY: Final = "sandbox_episode"
"""The ``agent_data.extra_fields`` key (hence the reward's ``extra_info`` key) of the verdict."""


class _ToolResponse(BaseModel):
    """verl's ``ToolResponse`` where verl is not installed (its fields)."""

    text: str | None = None
    image: list[Any] | None = None
    video: list[Any] | None = None


class _FunctionSchema(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    description: str
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}, "required": []}
    )
    strict: bool = False


class _ToolSchema(BaseModel):
    """verl's ``OpenAIFunctionToolSchema`` where verl is not installed."""

    type: str
    function: _FunctionSchema


class _BaseTool:
    """verl's ``BaseTool`` constructor and schema accessor where verl is not installed."""

    def __init__(self, config: dict[str, Any], tool_schema: Any) -> None:
        self.config = config
        self.tool_schema = tool_schema or self.get_openai_tool_schema()
        self.name = self.tool_schema.function.name

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema


try:
    from verl.tools.base_tool import BaseTool as _Base
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

    VERL_AVAILABLE = True
except ImportError:
    _Base, OpenAIFunctionToolSchema, ToolResponse = _BaseTool, _ToolSchema, _ToolResponse
    VERL_AVAILABLE = False


@dataclass
class _Trajectory:
    """One trajectory's episode, shared by the tools it called."""

    key: str
    # verl 0.9 creates and releases an instance around every call: the episode then
    # outlives the releases, and ends with the call that ends it (or the reward's judging)
    per_call: bool = False
    members: set[tuple[str, str]] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    episode: EpisodeInfo | None = None
    verdict: dict[str, Any] | None = None
    extra_fields: dict[str, Any] | None = None


@dataclass
class _Instance:
    create_kwargs: dict[str, Any]
    trajectory: _Trajectory | None = None


# Module state rather than the tools': verl deep-copies its tool objects, and the four
# tools of one trajectory are four objects that must find the same episode.
_INSTANCES: dict[tuple[str, str], _Instance] = {}
_TRAJECTORIES: dict[str, _Trajectory] = {}


def _default_schema(config: dict[str, Any]) -> dict[str, Any]:
    from sandbox.evals.agents import TOOL_SCHEMAS

    name = config.get("tool")
    for schema in TOOL_SCHEMAS:
        if schema["function"]["name"] == name and name in EPISODE_TOOL_NAMES:
            return schema
    raise ValueError(
        f"tool config: give the tool a tool_schema, or config.tool one of "
        f"{', '.join(EPISODE_TOOL_NAMES)} (got {name!r})"
    )


class SandboxEpisodeTool(_Base):
    """One of an episode's tools as a verl tool; the tools of a trajectory share its episode.

    ``config`` (the tool config YAML's ``config``): ``type: native`` (verl's);
    ``base_url`` (default ``$SANDBOX_URL``, else ``http://127.0.0.1:8000``); the API key
    in ``api_key``, or the environment variable ``api_key_env`` names (default
    ``SANDBOX_API_KEY``); ``task``: the task when a row names none; ``max_steps``,
    ``timeout_s``, ``max_output_chars``: the episode's budgets (at most the task's);
    ``tool``: the episode tool this verl tool runs (default: its schema's name).
    """

    def __init__(self, config: dict[str, Any], tool_schema: Any = None) -> None:
        config = dict(config or {})
        if tool_schema is None:
            tool_schema = OpenAIFunctionToolSchema.model_validate(_default_schema(config))
        super().__init__(config, tool_schema)
        self.tool: str = config.get("tool") or self.name
        if self.tool not in EPISODE_TOOL_NAMES:
            raise ValueError(
                f"tool config of {self.name!r}: config.tool (or the schema's function name) "
                f"must be one of {', '.join(EPISODE_TOOL_NAMES)}, not {self.tool!r}"
            )
        self.base_url: str = config.get("base_url") or os.environ.get("SANDBOX_URL", DEFAULT_URL)
        self.api_key_env: str = config.get("api_key_env", "SANDBOX_API_KEY")
        self.task: str | None = config.get("task")

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema

    # ------------------------------------------------------------------ verl's contract

    async def create(
        self, instance_id: str | None = None, create_kwargs: dict[str, Any] | None = None, **kwargs
    ) -> tuple[str, Any]:
        """Register this tool's instance for a trajectory; its episode opens at the first
        call. The agent loop passes the row's ``create_kwargs`` as one dict (``task``: the
        task reference); the SGLang rollout passes them as keywords with the trajectory's
        request id as ``instance_id``, which its tools then share."""
        arguments = {**(create_kwargs or {}), **kwargs}
        instance = _Instance(arguments)
        if instance_id is None:
            instance_id = uuid4().hex
        else:
            self._join(instance, instance_id, instance_id, per_call=False)
        _INSTANCES[(self.name, instance_id)] = instance
        return instance_id, ToolResponse()

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[Any, float | None, dict[str, Any]]:
        """Run the tool call in the trajectory's episode: ``(observation, reward, metrics)``.

        The reward is 0.0 until the call that ends the episode, then the hidden tests'
        (``None`` when the platform failed: the episode has no verdict); calls after the
        end get ``None`` (verl adds no reward for them)."""
        instance = self._instance(instance_id)
        agent_data = kwargs.get("agent_data")
        trajectory = instance.trajectory
        if trajectory is None:
            if agent_data is None:
                trajectory = self._join(instance, instance_id, instance_id, per_call=False)
            else:
                # The loop's one AgentData per trajectory (its request id alone may repeat:
                # verl's full_determinism makes it "det-<priority>").
                key = f"{getattr(agent_data, 'request_id', '')}@{id(agent_data)}"
                per_call = not hasattr(agent_data, "tool_instances")
                trajectory = self._join(instance, key, instance_id, per_call=per_call)
                if per_call:
                    with contextlib.suppress(TypeError):  # forget it with its AgentData
                        weakref.finalize(agent_data, _TRAJECTORIES.pop, key, None)
        extra = getattr(agent_data, "extra_fields", None)
        if isinstance(extra, dict):
            trajectory.extra_fields = extra
        async with trajectory.lock:
            if trajectory.verdict is not None:
                over = ToolResponse(text="error: the episode is over; no more tool calls")
                return over, None, {}  # no reward: the episode's came with its end
            episode = await self._episode(trajectory, instance, agent_data)
            try:
                async with self._client() as client:
                    step = await client.episode_step(episode.id, self.tool, parameters)
            except SandboxError as exc:
                self._infra(trajectory, f"the step failed: {exc}")
                await self._forget(trajectory)
                return ToolResponse(text="error: the sandbox failed; no verdict"), None, {}
            metrics: dict[str, Any] = {"episode": episode.id, "steps": step.steps}
            reward: float | None = 0.0
            if step.done:
                verdict = await self._judge(trajectory)
                reward = verdict["reward"]
                metrics.update(outcome=verdict["outcome"], passed=verdict["passed"])
            return ToolResponse(text=step.observation), reward, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float | None:
        """The episode's reward (the hidden tests run once, on the first ask); ``None``
        when the platform failed or the trajectory made no tool call."""
        trajectory = self._instance(instance_id).trajectory
        if trajectory is None:
            return None
        async with trajectory.lock:
            verdict = await self._judge(trajectory)
        reward: float | None = verdict["reward"]
        return reward

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Forget this tool's instance. Where instances live for the trajectory, its last
        release judges the episode (if no call ended it) and closes it; where they live
        for one call (verl 0.9), the episode stays for the trajectory's next call."""
        instance = _INSTANCES.pop((self.name, instance_id), None)
        trajectory = instance.trajectory if instance is not None else None
        if trajectory is None:
            return
        trajectory.members.discard((self.name, instance_id))
        if trajectory.members or (trajectory.per_call and trajectory.verdict is None):
            return
        async with trajectory.lock:
            await self._judge(trajectory)
            _TRAJECTORIES.pop(trajectory.key, None)

    # ------------------------------------------------------------------ the shared episode

    def _client(self) -> AsyncSandboxClient:
        api_key = self.config.get("api_key") or os.environ.get(self.api_key_env)
        return AsyncSandboxClient(self.base_url, api_key=api_key)

    def _instance(self, instance_id: str) -> _Instance:
        instance = _INSTANCES.get((self.name, instance_id))
        if instance is None:
            raise ValueError(f"{self.name}: no instance {instance_id!r}; call create() first")
        return instance

    def _join(
        self, instance: _Instance, key: str, instance_id: str, *, per_call: bool
    ) -> _Trajectory:
        trajectory = _TRAJECTORIES.get(key)
        if trajectory is None:
            trajectory = _TRAJECTORIES[key] = _Trajectory(key, per_call=per_call)
        trajectory.members.add((self.name, instance_id))
        instance.trajectory = trajectory
        return trajectory

    def _task(self, instance: _Instance, agent_data: Any) -> str:
        """The row's task: this tool's create_kwargs, else another episode tool's, else
        the config's."""
        if instance.create_kwargs.get("task"):
            return str(instance.create_kwargs["task"])
        tools_kwargs = getattr(agent_data, "tools_kwargs", None) or {}
        for name in EPISODE_TOOL_NAMES:
            task = (tools_kwargs.get(name) or {}).get("create_kwargs", {}).get("task")
            if task:
                return str(task)
        if self.task:
            return self.task
        raise ValueError(
            f"{self.name}: no task for this trajectory: set extra_info.tools_kwargs."
            f"{self.name}.create_kwargs.task in the dataset row (a shipped task id or "
            "upload:<digest>), or config.task in the tool config"
        )

    async def _episode(
        self, trajectory: _Trajectory, instance: _Instance, agent_data: Any
    ) -> EpisodeInfo:
        if trajectory.episode is None:
            task = self._task(instance, agent_data)
            async with self._client() as client:
                trajectory.episode = await client.open_episode(
                    task,
                    max_steps=self.config.get("max_steps"),
                    timeout_s=self.config.get("timeout_s"),
                    max_output_chars=self.config.get("max_output_chars"),
                )
            # pending: the reward function judges an episode no call ended (verl 0.9)
            self._report(trajectory, {"outcome": None, "reward": None, "passed": None})
        return trajectory.episode

    async def _judge(self, trajectory: _Trajectory) -> dict[str, Any]:
        """The verdict, judged once and reported; the episode is closed after it."""
        if trajectory.verdict is None:
            if trajectory.episode is None:
                return {"reward": None, "outcome": None, "passed": None}
            try:
                async with self._client() as client:
                    result = await client.judge_episode(trajectory.episode.id)
            except SandboxError as exc:
                self._infra(trajectory, f"judging failed: {exc}")
            else:
                verdict = {
                    "outcome": result.outcome,
                    "reward": result.reward,
                    "passed": result.passed,
                    "steps": result.steps,
                    "error": result.error,
                }
                trajectory.verdict = verdict
                self._report(trajectory, verdict)
            await self._forget(trajectory)
        assert trajectory.verdict is not None
        return trajectory.verdict

    async def _forget(self, trajectory: _Trajectory) -> None:
        """Close the episode (it keeps no verdict the tool has not kept)."""
        if trajectory.episode is not None:
            with contextlib.suppress(SandboxError):
                async with self._client() as client:
                    await client.close_episode(trajectory.episode.id)

    def _infra(self, trajectory: _Trajectory, error: str) -> None:
        logger.warning("verl tool %s: %s", self.name, error)
        verdict = {"outcome": "infra_error", "reward": None, "passed": None, "error": error}
        trajectory.verdict = verdict
        self._report(trajectory, verdict)

    def _report(self, trajectory: _Trajectory, verdict: dict[str, Any]) -> None:
        """The episode's record in the trajectory's extra fields (the reward's extra_info)."""
        if trajectory.extra_fields is not None and trajectory.episode is not None:
            episode = trajectory.episode
            trajectory.extra_fields[VERDICT_KEY] = {
                "episode": episode.id,
                "task": episode.task,
                "service": self.base_url,
                "api_key_env": self.api_key_env,
                **verdict,
            }


def compute_score(
    data_source: Any = None,
    solution_str: Any = None,
    ground_truth: Any = None,
    extra_info: dict[str, Any] | None = None,
    api_key: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's ``custom_reward_function``: the episode's reward from ``extra_info``.

    An episode no tool call ended (the policy stopped calling tools; verl 0.9 never
    says when a trajectory ends) is judged here, by the service the tool used (the API
    key: ``api_key``, e.g. from ``custom_reward_function.reward_kwargs``, else the tool's
    environment variable), and closed. ``score`` is the hidden tests' reward;
    ``sandbox_valid`` is 0 when the episode has no verdict (the platform failed, or no
    tool was called), and then ``score`` is 0.0 only because verl needs a number: filter
    such samples out, do not learn from them.
    """
    record = (extra_info or {}).get(VERDICT_KEY) or {}
    if record.get("episode") and record.get("outcome") is None:
        record = {**record, **_judge_now(record, api_key)}
    reward = record.get("reward")
    return {
        "score": float(reward) if reward is not None else 0.0,
        "sandbox_valid": int(reward is not None),
        "sandbox_outcome": record.get("outcome") or "none",
    }


def _judge_now(record: dict[str, Any], api_key: str | None) -> dict[str, Any]:
    key = api_key or os.environ.get(record.get("api_key_env") or "SANDBOX_API_KEY")
    try:
        with SandboxClient(record.get("service") or DEFAULT_URL, api_key=key) as client:
            result = client.judge_episode(record["episode"])
            client.close_episode(record["episode"])
    except SandboxError as exc:
        logger.warning("verl reward: episode %s: %s", record["episode"], exc)
        return {"outcome": "infra_error", "reward": None, "passed": None, "error": str(exc)}
    return {"outcome": result.outcome, "reward": result.reward, "passed": result.passed}
