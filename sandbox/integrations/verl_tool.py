"""verl's multi-turn tools over the service's episodes (``verl.tools.base_tool.BaseTool``).

verl's tool agent loop (``verl/experimental/agent_loop/tool_agent_loop.py``) offers
the policy the tools of a tool config YAML, one :class:`BaseTool` object per tool
name, and per trajectory: ``create(create_kwargs=...)`` on the first call of a tool,
``execute(instance_id, arguments, agent_data=...)`` for every call (it returns the
observation, a step reward and metrics), and ``release(instance_id)`` once when the
trajectory ends. :class:`SandboxEpisodeTool` is such a tool for each of an episode's
tools (``shell``, ``read_file``, ``write_file``, ``done``): the tools of one
trajectory share one episode (``POST /v1/episodes``), opened at the trajectory's
first tool call with the task its dataset row names (``extra_info.tools_kwargs.
<tool>.create_kwargs.task``, else the config's ``task``). When a call ends the
episode (``done``, the step budget, the time budget) the hidden tests run and that
call's step reward is the episode's reward; a trajectory that ends without it is
judged at its release. Either way the verdict is left in ``agent_data.extra_fields
["sandbox_episode"]`` (verl passes extra fields to the reward function's
``extra_info``; :func:`compute_score` reads it), and the episode is closed.

The older SGLang rollout's calls (``create(request_id, **create_kwargs)``,
``execute(request_id, ...)``, ``calc_reward(request_id)``, ``release(request_id)``)
share an episode by their common instance id and work too.

verl is not a dependency: where ``verl`` imports, the class subclasses its
``BaseTool`` and answers its ``ToolResponse``; elsewhere structural equivalents of
the two stand in. See ``examples/verl/sandbox_tool_config.yaml`` and the README.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Final
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field

from sandbox.client import DEFAULT_URL, AsyncSandboxClient
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
    members: set[tuple[str, str]] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    client: AsyncSandboxClient | None = None
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
            self._join(instance, instance_id, instance_id)
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
            # The loop's one AgentData per trajectory (its request id alone may repeat:
            # verl's full_determinism makes it "det-<priority>").
            key = (
                instance_id
                if agent_data is None
                else f"{getattr(agent_data, 'request_id', '')}@{id(agent_data)}"
            )
            trajectory = self._join(instance, key, instance_id)
        extra = getattr(agent_data, "extra_fields", None)
        if isinstance(extra, dict):
            trajectory.extra_fields = extra
        async with trajectory.lock:
            if trajectory.verdict is not None:
                over = ToolResponse(text="error: the episode is over; no more tool calls")
                return over, None, {}  # no reward: the episode's came with its end
            episode = await self._episode(trajectory, instance, agent_data)
            assert trajectory.client is not None
            try:
                step = await trajectory.client.episode_step(episode.id, self.tool, parameters)
            except SandboxError as exc:
                self._infra(trajectory, f"the step failed: {exc}")
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
        """Forget this tool's instance; the trajectory's last one judges the episode (if no
        call ended it) and closes it."""
        instance = _INSTANCES.pop((self.name, instance_id), None)
        trajectory = instance.trajectory if instance is not None else None
        if trajectory is None:
            return
        trajectory.members.discard((self.name, instance_id))
        if trajectory.members:
            return
        _TRAJECTORIES.pop(trajectory.key, None)
        async with trajectory.lock:
            try:
                await self._judge(trajectory)
            finally:
                client, episode = trajectory.client, trajectory.episode
                trajectory.client = None
                if client is not None:
                    if episode is not None:
                        with contextlib.suppress(SandboxError):
                            await client.close_episode(episode.id)
                    await client.aclose()

    # ------------------------------------------------------------------ the shared episode

    def _instance(self, instance_id: str) -> _Instance:
        instance = _INSTANCES.get((self.name, instance_id))
        if instance is None:
            raise ValueError(f"{self.name}: no instance {instance_id!r}; call create() first")
        return instance

    def _join(self, instance: _Instance, key: str, instance_id: str) -> _Trajectory:
        trajectory = _TRAJECTORIES.get(key)
        if trajectory is None:
            trajectory = _TRAJECTORIES[key] = _Trajectory(key)
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
        if trajectory.episode is not None:
            return trajectory.episode
        task = self._task(instance, agent_data)
        api_key = self.config.get("api_key") or os.environ.get(self.api_key_env)
        client = AsyncSandboxClient(self.base_url, api_key=api_key)
        try:
            trajectory.episode = await client.open_episode(
                task,
                max_steps=self.config.get("max_steps"),
                timeout_s=self.config.get("timeout_s"),
                max_output_chars=self.config.get("max_output_chars"),
            )
        except BaseException:
            await client.aclose()
            raise
        trajectory.client = client
        return trajectory.episode

    async def _judge(self, trajectory: _Trajectory) -> dict[str, Any]:
        """The verdict, judged once, and left in the trajectory's extra fields."""
        if trajectory.verdict is None:
            if trajectory.episode is None or trajectory.client is None:
                return {"reward": None, "outcome": None, "passed": None}
            try:
                result = await trajectory.client.judge_episode(trajectory.episode.id)
            except SandboxError as exc:
                self._infra(trajectory, f"judging failed: {exc}")
            else:
                trajectory.verdict = {
                    "episode": result.episode,
                    "task": trajectory.episode.task,
                    "outcome": result.outcome,
                    "reward": result.reward,
                    "passed": result.passed,
                    "steps": result.steps,
                    "error": result.error,
                }
            self._report(trajectory)
        assert trajectory.verdict is not None
        return trajectory.verdict

    def _infra(self, trajectory: _Trajectory, error: str) -> None:
        logger.warning("verl tool %s: %s", self.name, error)
        episode = trajectory.episode
        trajectory.verdict = {
            "episode": episode.id if episode else None,
            "task": episode.task if episode else None,
            "outcome": "infra_error",
            "reward": None,
            "passed": None,
            "steps": None,
            "error": error,
        }
        self._report(trajectory)

    @staticmethod
    def _report(trajectory: _Trajectory) -> None:
        if trajectory.extra_fields is not None and trajectory.verdict is not None:
            trajectory.extra_fields[VERDICT_KEY] = dict(trajectory.verdict)


def compute_score(
    data_source: Any = None,
    solution_str: Any = None,
    ground_truth: Any = None,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's ``custom_reward_function``: the episode's reward from ``extra_info``.

    ``score`` is the hidden tests' reward; ``sandbox_valid`` is 0 when the episode has no
    verdict (the platform failed, or no tool was called), and then ``score`` is 0.0 only
    because verl needs a number: filter such samples out, do not learn from them.
    """
    verdict = (extra_info or {}).get(VERDICT_KEY) or {}
    reward = verdict.get("reward")
    return {
        "score": float(reward) if reward is not None else 0.0,
        "sandbox_valid": int(reward is not None),
        "sandbox_outcome": verdict.get("outcome") or "none",
    }
