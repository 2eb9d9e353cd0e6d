"""The verl tool (sandbox/integrations/verl_tool.py) driven the way verl drives tools, against
a real ``sandbox serve``: the observations are the sandbox's and the hidden tests decide the reward.

verl is not installed (it is heavy), so :class:`AgentLoop` below performs verl's own calls,
in verl's order and with verl's argument shapes, as verl-project/verl
``verl/experimental/agent_loop/tool_agent_loop.py`` on its main branch (commit 07be0c65)
does them::

    # ToolAgentLoop._call_tool: one BaseTool instance per tool per trajectory
    async with agent_data.tool_instance_lock:
        instance_id = agent_data.tool_instances.get(tool_name)
        if instance_id is None:
            kwargs = tools_kwargs.get(tool_name, {})
            instance_id, _ = await tool.create(create_kwargs=kwargs.get("create_kwargs", {}))
            agent_data.tool_instances[tool_name] = instance_id
    tool_execution_response, tool_reward, res = await tool.execute(
        instance_id, tool_args, agent_data=agent_data)
    # (any exception -> ToolResponse(text=f"Error executing tool '{tool_name}': {e}"), 0.0, {})
    # _handle_processing_tools_state: the calls of one turn run with asyncio.gather, and
    if tool_reward is not None:
        agent_data.tool_rewards.append(tool_reward)
    # run(): finally: await self._release_tool_instances(agent_data)
    for tool_name, instance_id in agent_data.tool_instances.items():
        await active_tools[tool_name].release(instance_id)
    output.extra_fields.update({"turn_scores": ..., "tool_rewards": agent_data.tool_rewards})

and :class:`PerCallAgentLoop` as the same file does in verl 0.9.1 (the release on PyPI),
whose ``AgentData`` has no ``tool_instances``::

    # ToolAgentLoop._call_tool: an instance around every call
    kwargs = tools_kwargs.get(tool_name, {})
    instance_id, _ = await tool.create(create_kwargs=kwargs.get("create_kwargs", {}))
    tool_execution_response, tool_reward, res = await tool.execute(
        instance_id, tool_args, agent_data=agent_data)
    ...
    finally:
        if tool and instance_id and not isinstance(tool, FunctionTool):
            await tool.release(instance_id)

The tools come from the tool config YAML as ``verl/tools/utils/tool_registry.py`` builds
them (``ToolType(tool_config.config.type)`` must be ``native``; ``tool_cls(config=...,
tool_schema=OpenAIFunctionToolSchema.model_validate(...))``; ``ToolListCache`` hands out
``copy.deepcopy`` of the list), ``tools_kwargs`` is the row's ``extra_info.tools_kwargs``
(``verl/utils/dataset/rl_dataset.py``), and the reward function gets ``extra_info`` updated
with the loop's extra fields (``verl/experimental/reward_loop/reward_manager/naive.py``:
``extra_info.update(tool_extra_fields.items())``). The SGLang rollout's older sequence
(``verl/workers/rollout/sglang_rollout/sglang_rollout.py``: ``create(_req.request_id,
**create_kwargs)``, ``execute(_req.request_id, arguments)``, ``calc_reward(_req.request_id)``,
``release(_req.request_id)``) is driven too.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import importlib
import inspect
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from sandbox.client import AsyncSandboxClient, SandboxClient
from sandbox.errors import NotFoundError
from sandbox.integrations import verl_tool
from sandbox.integrations.verl_tool import OpenAIFunctionToolSchema, ToolResponse, compute_score

from ..conftest import REPO, Service, kill_container_running
from .test_episodes import make_task

pytestmark = pytest.mark.docker

CONFIG = REPO / "examples" / "verl" / "sandbox_tool_config.yaml"


def load_tools(service_url: str) -> dict[str, Any]:
    """The YAML's tools as verl's tool registry builds them (then deep-copied, as cached)."""
    tools = []
    for tool_config in yaml.safe_load(CONFIG.read_text())["tools"]:
        assert tool_config["config"]["type"] == "native"
        module_name, class_name = tool_config["class_name"].rsplit(".", 1)
        tool_cls = getattr(importlib.import_module(module_name), class_name)
        config = {**tool_config["config"], "base_url": service_url}
        schema = OpenAIFunctionToolSchema.model_validate(tool_config["tool_schema"])
        tools.append(tool_cls(config=config, tool_schema=schema))
    return {tool.name: tool for tool in copy.deepcopy(tools)}


@dataclass
class AgentData:
    """The fields of verl's ``AgentData`` a tool call touches."""

    tools_kwargs: dict[str, Any]
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    tool_instances: dict[str, str] = field(default_factory=dict)
    tool_instance_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tool_rewards: list[float] = field(default_factory=list)
    extra_fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class PerCallAgentData:
    """verl 0.9.1's ``AgentData`` fields a tool call touches (no ``tool_instances``)."""

    tools_kwargs: dict[str, Any]
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    tool_rewards: list[float] = field(default_factory=list)
    extra_fields: dict[str, Any] = field(default_factory=dict)


class AgentLoop:
    """verl's ``ToolAgentLoop`` tool handling, with a scripted policy's turns of tool calls."""

    agent_data = AgentData

    def __init__(self, tools: dict[str, Any]) -> None:
        self.tools = tools

    async def _call_tool(
        self, name: str, arguments: str, agent_data: AgentData
    ) -> tuple[Any, float | None, dict[str, Any]]:
        if name not in self.tools:
            return ToolResponse(text=f"Unknown function '{name}'."), 0.0, {}
        tool_args = json.loads(arguments)
        try:
            tool = self.tools[name]
            async with agent_data.tool_instance_lock:
                instance_id = agent_data.tool_instances.get(name)
                if instance_id is None:
                    kwargs = agent_data.tools_kwargs.get(name, {})
                    instance_id, _ = await tool.create(
                        create_kwargs=kwargs.get("create_kwargs", {})
                    )
                    agent_data.tool_instances[name] = instance_id
            response, reward, metrics = await tool.execute(
                instance_id, tool_args, agent_data=agent_data
            )
        except Exception as e:
            return ToolResponse(text=f"Error executing tool '{name}': {e}"), 0.0, {}
        return ToolResponse(text=response.text), reward, metrics

    async def run(
        self, extra_info: dict[str, Any], turns: list[list[tuple[str, dict[str, Any]]]]
    ) -> tuple[list[list[str]], dict[str, Any]]:
        """Each turn's tool calls at once; the observations per turn, and the reward
        function's ``extra_info`` (the row's, updated with the loop's extra fields)."""
        agent_data = self.agent_data(tools_kwargs=extra_info.get("tools_kwargs", {}))
        observations = []
        try:
            for calls in turns:
                responses = await asyncio.gather(
                    *(self._call_tool(n, json.dumps(a), agent_data) for n, a in calls)
                )
                for _, reward, _ in responses:
                    if reward is not None:
                        agent_data.tool_rewards.append(reward)
                observations.append([response.text for response, _, _ in responses])
        finally:
            for name, instance_id in getattr(agent_data, "tool_instances", {}).items():
                await self.tools[name].release(instance_id)
        extra_fields = {**agent_data.extra_fields, "tool_rewards": agent_data.tool_rewards}
        return observations, {**extra_info, **extra_fields}


class PerCallAgentLoop(AgentLoop):
    """verl 0.9.1's ``ToolAgentLoop``: create, execute and release around every call."""

    agent_data = PerCallAgentData  # type: ignore[assignment]

    async def _call_tool(
        self, name: str, arguments: str, agent_data: Any
    ) -> tuple[Any, float | None, dict[str, Any]]:
        if name not in self.tools:
            return ToolResponse(text=f"Unknown function '{name}'."), 0.0, {}
        tool_args = json.loads(arguments)
        tool, instance_id = None, None
        try:
            tool = self.tools[name]
            kwargs = agent_data.tools_kwargs.get(name, {})
            instance_id, _ = await tool.create(create_kwargs=kwargs.get("create_kwargs", {}))
            response, reward, metrics = await tool.execute(
                instance_id, tool_args, agent_data=agent_data
            )
        except Exception as e:
            return ToolResponse(text=f"Error executing tool '{name}': {e}"), 0.0, {}
        finally:
            if tool and instance_id:
                await tool.release(instance_id)
        return ToolResponse(text=response.text), reward, metrics


@pytest.fixture(scope="module")
def task(service: Service, tmp_path_factory: pytest.TempPathFactory) -> str:
    with SandboxClient(service.url) as client:
        return client.upload_task(make_task(tmp_path_factory.mktemp("verl"), 41)).task


def row(task: str) -> dict[str, Any]:
    """A dataset row's extra_info: the task named once, in one tool's create_kwargs."""
    return {"tools_kwargs": {"shell": {"create_kwargs": {"task": task}}}}


async def episode_gone(service: Service, episode_id: str) -> bool:
    async with AsyncSandboxClient(service.url) as client:
        try:
            await client._request("GET", f"/v1/episodes/{episode_id}")
        except NotFoundError:
            return True
    return False


def test_the_yaml_schemas_are_the_episode_tools(service: Service, task: str) -> None:
    tools = load_tools(service.url)
    with SandboxClient(service.url) as client:
        episode = client.open_episode(task)
        client.close_episode(episode.id)
    in_yaml = [t["tool_schema"] for t in yaml.safe_load(CONFIG.read_text())["tools"]]
    assert in_yaml == episode.tools
    assert list(tools) == ["shell", "read_file", "write_file", "done"]
    for tool, schema in zip(tools.values(), episode.tools, strict=True):
        parsed = tool.tool_schema.model_dump(exclude_unset=True)  # verl may drop extras
        assert (
            parsed["function"]["parameters"]["properties"]
            == (schema["function"]["parameters"]["properties"])
        )


async def test_a_trajectory_shares_one_episode_and_done_brings_the_reward(
    service: Service, task: str
) -> None:
    loop = AgentLoop(load_tools(service.url))
    observations, extra_info = await loop.run(
        row(task),
        [
            [("shell", {"command": "cat value.txt; ls"}), ("read_file", {"path": "value.txt"})],
            [("write_file", {"path": "answer.txt", "content": "42"})],
            [("shell", {"command": "cat answer.txt"})],  # the last of the task's 4 steps
            [("shell", {"command": "echo too late"})],
        ],
    )
    assert observations[3] == ["error: the episode is over; no more tool calls"]
    assert observations[0][0].splitlines()[:3] == ["exit_code: 0", "[stdout]", "41"]
    assert "41" in observations[0][1]
    assert observations[1] == ["wrote 2 bytes to answer.txt"]
    assert "42" in observations[2][0]  # the same episode's workspace: the write is there
    verdict = extra_info["sandbox_episode"]
    assert (verdict["outcome"], verdict["reward"], verdict["passed"]) == ("passed", 1.0, True)
    assert extra_info["tool_rewards"] == [0.0, 0.0, 0.0, 1.0]  # the last step's: 1.0
    assert compute_score("d", "", None, extra_info)["score"] == 1.0
    assert await episode_gone(service, verdict["episode"])  # released: closed
    assert verl_tool._TRAJECTORIES == {} and verl_tool._INSTANCES == {}


async def test_concurrent_trajectories_are_judged_at_release_without_done(
    service: Service, task: str
) -> None:
    loop = AgentLoop(load_tools(service.url))
    runs = await asyncio.gather(
        *(
            loop.run(
                row(task),
                [
                    [("shell", {"command": "ls"})],
                    [("write_file", {"path": "answer.txt", "content": answer})],
                ],
            )
            for answer in ("42", "7")
        )
    )
    assert all("answer.txt" not in obs[0][0] for obs, _ in runs)  # fresh copies of the task
    verdicts = [extra["sandbox_episode"] for _, extra in runs]
    assert [(v["outcome"], v["reward"]) for v in verdicts] == [("passed", 1.0), ("failed", 0.0)]
    assert verdicts[0]["episode"] != verdicts[1]["episode"]
    assert [extra["tool_rewards"] for _, extra in runs] == [[0.0, 0.0], [0.0, 0.0]]
    assert [compute_score("d", "", None, extra)["score"] for _, extra in runs] == [1.0, 0.0]
    for verdict in verdicts:
        assert await episode_gone(service, verdict["episode"])


async def test_a_row_without_a_task_is_an_error_the_policy_sees(service: Service) -> None:
    loop = AgentLoop(load_tools(service.url))
    observations, extra_info = await loop.run({}, [[("shell", {"command": "true"})]])
    assert "tools_kwargs.shell.create_kwargs.task" in observations[0][0]
    score = compute_score("d", "", None, extra_info)
    assert (score["sandbox_valid"], "sandbox_episode" in extra_info) == (0, False)


async def test_the_sglang_rollout_sequence(service: Service, task: str) -> None:
    """create(request_id, **create_kwargs) per tool in tools_kwargs, execute(request_id, ...),
    then calc_reward and release per tool: the tools share the request id's episode."""
    tools = load_tools(service.url)
    request_id = uuid.uuid4().hex
    tools_kwargs = {name: {"create_kwargs": {"task": task}} for name in tools}
    for name in tools_kwargs:
        created, response = await tools[name].create(
            request_id, **tools_kwargs[name]["create_kwargs"]
        )
        assert created == request_id and response.text is None
    shell, _, _ = await tools["shell"].execute(request_id, {"command": "cat value.txt"})
    wrote, reward, _ = await tools["write_file"].execute(
        request_id, {"path": "answer.txt", "content": "42"}
    )
    assert "41" in shell.text and reward == 0.0 and wrote.text.startswith("wrote 2 bytes")
    rewards = [await tools[name].calc_reward(request_id) for name in tools_kwargs]
    assert rewards == [1.0] * 4
    for name in tools_kwargs:
        await tools[name].release(request_id)
    assert verl_tool._TRAJECTORIES == {} and verl_tool._INSTANCES == {}


class VerlBaseTool:
    """verl's ``BaseTool`` contract, transcribed from verl-project/verl
    ``verl/tools/base_tool.py`` (commit 3e3662a0): the signatures its callers rely on."""

    def __init__(self, config: dict, tool_schema: Any) -> None: ...

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]: ...

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[Any, float, dict]: ...

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float: ...

    async def release(self, instance_id: str, **kwargs: Any) -> None: ...


@pytest.mark.parametrize("method", ["__init__", "create", "execute", "calc_reward", "release"])
def test_the_tool_takes_every_call_verls_base_tool_takes(method: str) -> None:
    """Each of verl's parameters at its place, by its name and kind, with verl's default (or
    one where verl has none); ``**kwargs`` taken; anything more optional; async as verl's."""
    ours = getattr(verl_tool.SandboxEpisodeTool, method)
    theirs = getattr(VerlBaseTool, method)
    assert inspect.iscoroutinefunction(ours) == inspect.iscoroutinefunction(theirs)
    mine = list(inspect.signature(ours).parameters.values())
    verls = list(inspect.signature(theirs).parameters.values())
    for at, param in enumerate(verls):
        if param.kind is param.VAR_KEYWORD:
            assert mine[-1].kind is param.VAR_KEYWORD, f"{method} takes no **kwargs"
            continue
        assert (mine[at].name, mine[at].kind) == (param.name, param.kind), f"{method}: {mine[at]}"
        if param.default is not param.empty:
            assert mine[at].default == param.default, f"{method}: {mine[at]}"
    named = {param.name for param in verls}
    for param in mine:
        if param.name not in named and param.kind is not param.VAR_KEYWORD:
            assert param.default is not param.empty, f"{method}: {param} is required"


def test_the_tool_schema_defaults_from_the_config_tool() -> None:
    tool = verl_tool.SandboxEpisodeTool({"type": "native", "tool": "read_file"}, None)
    assert tool.name == "read_file"
    with pytest.raises(ValueError, match=r"config\.tool"):
        verl_tool.SandboxEpisodeTool({"type": "native", "tool": "rm_rf"}, None)


async def test_a_killed_sandbox_gives_no_reward_never_zero(service: Service, task: str) -> None:
    """The episode's container dies mid-trajectory: the step reward is None (verl leaves it
    out of tool_rewards), the verdict says infra_error, and the score is flagged invalid."""
    marker = f"verl-marker-{uuid.uuid4().hex[:8]}"

    class Killer(AgentLoop):
        async def _call_tool(self, name: str, arguments: str, agent_data: AgentData) -> Any:
            if name == "read_file":  # the second turn: the sandbox dies first
                await asyncio.to_thread(kill_container_running, service, marker)
            return await super()._call_tool(name, arguments, agent_data)

    _, extra_info = await Killer(load_tools(service.url)).run(
        row(task),
        [
            [("shell", {"command": f"(exec -a {marker} sleep 300) >/dev/null 2>&1 &"})],
            [("read_file", {"path": "value.txt"})],
        ],
    )
    verdict = extra_info["sandbox_episode"]
    assert (verdict["outcome"], verdict["reward"], verdict["passed"]) == ("infra_error", None, None)
    assert extra_info["tool_rewards"] == [0.0]  # the failed step's None is not a reward
    assert compute_score("d", "", None, extra_info)["sandbox_valid"] == 0
    assert await episode_gone(service, verdict["episode"])


async def test_verl_09s_call_by_call_lifecycle_keeps_the_episode_between_calls(
    service: Service, task: str
) -> None:
    """verl 0.9.1 releases after every call: the episode lives on between calls, ends with
    done (judged, closed), or, when no call ends it, is judged by the reward function."""
    loop = PerCallAgentLoop(load_tools(service.url))
    ended, stopped = await asyncio.gather(
        loop.run(
            row(task),
            [
                [("write_file", {"path": "answer.txt", "content": "42"})],
                [("shell", {"command": "cat answer.txt"})],
                [("done", {})],
            ],
        ),
        loop.run(
            row(task),
            [
                [("shell", {"command": "cat value.txt"})],
                [("write_file", {"path": "answer.txt", "content": "42"})],
            ],
        ),
    )
    observations, extra_info = ended
    assert "42" in observations[1][0]  # the write of the call before, in the same episode
    verdict = extra_info["sandbox_episode"]
    assert (verdict["outcome"], verdict["reward"]) == ("passed", 1.0)
    assert extra_info["tool_rewards"] == [0.0, 0.0, 1.0]
    assert await episode_gone(service, verdict["episode"])

    observations, extra_info = stopped
    assert "41" in observations[0][0]
    pending = extra_info["sandbox_episode"]
    assert (pending["outcome"], pending["reward"]) == (None, None)  # nothing ended it yet
    assert not await episode_gone(service, pending["episode"])
    score = await asyncio.to_thread(compute_score, "d", "", None, extra_info)
    assert score == {"score": 1.0, "sandbox_valid": 1, "sandbox_outcome": "passed"}
    assert await episode_gone(service, pending["episode"])  # judged and closed
    gc.collect()
    assert verl_tool._TRAJECTORIES == {} and verl_tool._INSTANCES == {}
