"""``/openenv/{task}``: a task as an OpenEnv environment (``/reset``, ``/step``, ``/state``,
``/health``, ``/ws``), for OpenEnv clients to drive episodes.

OpenEnv clients take a base URL and append the endpoint (``EnvClient`` connects to
``<base_url>/ws``), so each task's base URL is ``http://HOST/openenv/<task>`` (a
shipped task's id, or ``upload:<digest>``). Actions are tool calls (``{"tool":
"shell", "arguments": {"command": "ls"}}``), observations are what the episode's step
returns, and the reward arrives with ``done``: the hidden tests judge the episode then.

- WebSocket ``/ws`` (what ``EnvClient`` speaks): one episode per connection; messages
  ``{"type": "reset"|"step"|"state"|"close", "data": ...}``, answers ``{"type":
  "observation"|"state"|"error", "data": ...}``. The episode is closed when the socket
  closes.
- HTTP: OpenEnv's own HTTP server makes a fresh environment per request; an episode
  must outlive a request, so ``/reset`` opens one and names it (``observation.
  episode_id``: the ``episode_id`` the request gave, else the episode's id), and
  ``/step`` and ``/state`` take that ``episode_id`` (without one: the caller's latest
  reset of the task).

Authentication is the API's (``Authorization: Bearer``, ``X-API-Key``; on the
WebSocket also HTTP Basic, which ``ws://KEY@host/...`` URLs send). A WebSocket
handshake from a browser (one with an ``Origin`` header) is refused.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Body, Query, Request, WebSocket, WebSocketDisconnect
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError
from starlette.websockets import WebSocketState

from sandbox.errors import NotFoundError, QuotaError, SandboxError, status_and_code
from sandbox.service.tenants import Tenant

from ..deps import TenantDep, WorkingTenantDep
from ..errors import error_responses
from ..routing import TextJSONRoute
from .episodes import Episodes, EpisodesDep

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/openenv/{task}", tags=["openenv"], route_class=TextJSONRoute)

TaskPath = Annotated[
    str, Field(min_length=1, max_length=256, description="A shipped task's id, or upload:<digest>.")
]
HandleField = Field(
    default=None,
    min_length=1,
    max_length=255,
    description="The episode's name from /reset (default: the caller's latest of this task).",
)
MAX_HANDLES_PER_TENANT: Final = 4096


class OpenEnvReset(BaseModel):
    """OpenEnv's reset request, with the episode's budgets; unknown fields are ignored,
    as OpenEnv's server drops what the environment's ``reset`` does not take."""

    model_config = ConfigDict(extra="ignore")

    seed: int | None = Field(default=None, ge=0, description="Ignored: a task is what it is.")
    episode_id: str | None = Field(
        default=None, min_length=1, max_length=255, description="Name the episode (HTTP)."
    )
    max_steps: int | None = Field(default=None, ge=1, description="At most the task's own.")
    timeout_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="At most the task's own."
    )
    max_output_chars: int | None = Field(
        default=None, ge=16, le=1_000_000, description="Each observation's cap (head and tail)."
    )


class OpenEnvAction(BaseModel):
    """One tool call: ``shell`` {command, timeout_s?}, ``read_file`` {path}, ``write_file``
    {path, content}, ``done`` {message?}."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(
        min_length=1, max_length=64, validation_alias=AliasChoices("tool", "tool_name")
    )
    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="An object, or its JSON text (as models emit it)."
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Ignored (OpenEnv's).")


class OpenEnvStep(BaseModel):
    """OpenEnv's step request; ``episode_id`` names the HTTP episode."""

    model_config = ConfigDict(extra="ignore")

    action: OpenEnvAction
    episode_id: str | None = HandleField
    timeout_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="Ignored: the tool's own limits."
    )
    request_id: str | None = Field(default=None, max_length=255)


class OpenEnvObservation(BaseModel):
    """What the policy reads: the instruction after reset, a tool's output after a step."""

    text: str
    episode_id: str = Field(description="The episode's name: give it to /step and /state.")
    sandbox_episode: str = Field(description="The episode's id under /v1/episodes.")
    steps: int
    steps_left: int
    instruction: str | None = None
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="After reset: the tools to call, as OpenAI function schemas."
    )
    outcome: str | None = Field(default=None, description="With done: the evaluator's outcome.")
    passed: bool | None = None


class OpenEnvResult(BaseModel):
    """OpenEnv's reset and step response."""

    observation: OpenEnvObservation
    reward: float | None = Field(
        default=None, description="With done: the hidden tests' (None: the platform failed)."
    )
    done: bool = False


class OpenEnvState(BaseModel):
    """OpenEnv's state: the episode's id and step count, and its budget."""

    episode_id: str
    step_count: int
    sandbox_episode: str
    task: str
    done: bool
    max_steps: int
    time_left_s: float


class OpenEnvHealth(BaseModel):
    status: Literal["healthy"] = "healthy"


@dataclass
class _Named:
    episode: str
    task: str


@dataclass
class OpenEnvNames:
    """The HTTP episodes' names per tenant, and each tenant's latest per task
    (``app.state.openenv``)."""

    names: dict[tuple[str, str], _Named] = field(default_factory=dict)
    latest: dict[tuple[str, str], str] = field(default_factory=dict)


class Driver:
    """The OpenEnv verbs over one tenant's episodes of one task (HTTP and WebSocket)."""

    def __init__(self, episodes: Episodes, tenant: Tenant, task: str) -> None:
        self.episodes, self.tenant, self.task = episodes, tenant, task

    async def reset(self, body: OpenEnvReset) -> tuple[str, OpenEnvResult]:
        task = await asyncio.to_thread(
            self.episodes.catalog.get, self.task, tenant=self.tenant.name
        )
        self.tenant.allow_policy(task.config.policy)
        info = await self.episodes.manager.open(
            task,
            tenant=self.tenant.name,
            max_steps=body.max_steps,
            timeout_s=body.timeout_s,
            max_output_chars=body.max_output_chars,
        )
        name = body.episode_id or info.id
        observation = OpenEnvObservation(
            text=info.instruction,
            episode_id=name,
            sandbox_episode=info.id,
            steps=0,
            steps_left=info.max_steps,
            instruction=info.instruction,
            tools=info.tools,
        )
        return info.id, OpenEnvResult(observation=observation)

    async def step(self, episode: str, name: str, action: OpenEnvAction) -> OpenEnvResult:
        manager, tenant = self.episodes.manager, self.tenant.name
        step = await manager.step(episode, action.tool, action.arguments, tenant=tenant)
        observation = OpenEnvObservation(
            text=step.observation,
            episode_id=name,
            sandbox_episode=episode,
            steps=step.steps,
            steps_left=step.steps_left,
        )
        reward = None
        if step.done:
            verdict = await manager.judge(episode, tenant=tenant)
            observation.outcome, observation.passed = verdict.outcome, verdict.passed
            reward = verdict.reward
        return OpenEnvResult(observation=observation, reward=reward, done=step.done)

    def state(self, episode: str, name: str) -> OpenEnvState:
        info = self.episodes.manager.get(episode, tenant=self.tenant.name)
        return OpenEnvState(
            episode_id=name,
            step_count=info.steps,
            sandbox_episode=info.id,
            task=self.task,
            done=info.done,
            max_steps=info.max_steps,
            time_left_s=info.time_left_s,
        )


# ---------------------------------------------------------------------------------- HTTP


def _names(request: Request) -> OpenEnvNames:
    names: OpenEnvNames = request.app.state.openenv
    return names


def _named(request: Request, tenant: Tenant, task: str, name: str | None) -> tuple[str, str]:
    """The episode id (and name) an HTTP request names, else the caller's latest reset."""
    state = _names(request)
    if name is None:
        name = state.latest.get((tenant.name, task))
        if name is None:
            raise NotFoundError(f"no episode of {task!r}: POST /openenv/{task}/reset first")
    named = state.names.get((tenant.name, name))
    if named is None or named.task != task:
        raise NotFoundError(f"no episode {name!r} of {task!r}: POST /openenv/{task}/reset first")
    return named.episode, name


def _forget_gone(state: OpenEnvNames, episodes: Episodes, tenant: str) -> None:
    """Drop the names of a tenant's episodes the manager has forgotten."""
    for key, named in list(state.names.items()):
        if key[0] != tenant:
            continue
        try:
            episodes.manager.get(named.episode, tenant=tenant)
        except NotFoundError:
            del state.names[key]
            if state.latest.get((tenant, named.task)) == key[1]:
                del state.latest[(tenant, named.task)]


@router.post(
    "/reset",
    response_model=OpenEnvResult,
    responses=error_responses(401, 403, 404, 422, 429, 501, 503, 504),
)
async def reset(
    task: TaskPath,
    request: Request,
    episodes: EpisodesDep,
    tenant: WorkingTenantDep,
    body: Annotated[OpenEnvReset | None, Body()] = None,
) -> OpenEnvResult:
    """Start an episode of the task (a new one each time; an ``episode_id`` named before is
    closed and now names the new episode): the instruction and the tools."""
    body = body or OpenEnvReset()
    state = _names(request)
    _forget_gone(state, episodes, tenant.name)
    if sum(1 for key in state.names if key[0] == tenant.name) >= MAX_HANDLES_PER_TENANT:
        raise QuotaError(
            f"{MAX_HANDLES_PER_TENANT} named episodes: close some (DELETE /v1/episodes/{{id}})"
        )
    episode, result = await Driver(episodes, tenant, task).reset(body)
    name = result.observation.episode_id
    previous = state.names.get((tenant.name, name))
    state.names[(tenant.name, name)] = _Named(episode, task)
    state.latest[(tenant.name, task)] = name
    if previous is not None and previous.episode != episode:
        with contextlib.suppress(NotFoundError):
            await episodes.manager.close(previous.episode, tenant=tenant.name)
    return result


@router.post(
    "/step",
    response_model=OpenEnvResult,
    responses=error_responses(401, 404, 422, 429, 503, 504),
)
async def step(
    task: TaskPath,
    body: OpenEnvStep,
    request: Request,
    episodes: EpisodesDep,
    tenant: WorkingTenantDep,
) -> OpenEnvResult:
    """One tool call in the named episode; with ``done`` the hidden tests' reward."""
    episode, name = _named(request, tenant, task, body.episode_id)
    return await Driver(episodes, tenant, task).step(episode, name, body.action)


@router.get("/state", response_model=OpenEnvState, responses=error_responses(401, 404, 422, 429))
async def state(
    task: TaskPath,
    request: Request,
    episodes: EpisodesDep,
    tenant: TenantDep,
    episode_id: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
) -> OpenEnvState:
    """The named episode's state (its step count and budget)."""
    episode, name = _named(request, tenant, task, episode_id)
    return Driver(episodes, tenant, task).state(episode, name)


@router.get("/health", response_model=OpenEnvHealth, responses=error_responses(401, 404, 429, 501))
async def health(task: TaskPath, episodes: EpisodesDep, tenant: TenantDep) -> OpenEnvHealth:
    """``healthy`` when the task exists for the caller and the service runs episodes."""
    await asyncio.to_thread(episodes.catalog.get, task, tenant=tenant.name)
    _ = episodes.manager  # a fleet front end runs no episodes: 501
    return OpenEnvHealth()


# ----------------------------------------------------------------------------- WebSocket


def _presented_key(websocket: WebSocket) -> str | None:
    headers = websocket.headers
    authorization = headers.get("authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials:
        return credentials.strip()
    if scheme.lower() == "basic" and credentials:
        with contextlib.suppress(binascii.Error, UnicodeDecodeError):
            user, _, password = base64.b64decode(credentials).decode().partition(":")
            return password or user or None
    return headers.get("x-api-key")


def _error(message: str, code: str) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code}}


@router.websocket("/ws")
async def ws_episode(websocket: WebSocket, task: str) -> None:
    """One episode per connection: ``reset`` starts one (closing the previous), ``step``
    runs a tool call, ``state`` reads it, ``close`` (or closing the socket) ends it."""
    if "origin" in websocket.headers:  # browsers send it; OpenEnv's client does not
        await websocket.close(code=1008, reason="browser origins may not drive episodes")
        return
    episodes: Episodes = websocket.app.state.episodes
    try:
        tenant = websocket.app.state.platform.keyring.authenticate(_presented_key(websocket))
    except SandboxError as exc:
        await websocket.close(code=1008, reason=str(exc)[:120])
        return
    await websocket.accept()
    driver = Driver(episodes, tenant, task)
    episode: str | None = None
    try:
        while True:
            raw = await websocket.receive_text()
            reply, episode, closing = await _answer(driver, episode, raw)
            if closing:
                break
            await websocket.send_text(json.dumps(reply))
    except (WebSocketDisconnect, OSError):  # the client left (mid-step: on the reply)
        pass
    finally:
        if episode is not None:
            with contextlib.suppress(SandboxError):
                await episodes.manager.close(episode, tenant=tenant.name)
        if websocket.client_state is WebSocketState.CONNECTED:
            with contextlib.suppress(RuntimeError):
                await websocket.close()


async def _answer(
    driver: Driver, episode: str | None, raw: str
) -> tuple[dict[str, Any], str | None, bool]:
    """The reply to one message, the connection's episode after it, and whether to close."""
    try:
        message = json.loads(raw)
    except json.JSONDecodeError as exc:
        return _error(f"Invalid JSON: {exc}", "INVALID_JSON"), episode, False
    if not isinstance(message, dict):
        return _error("a message is a JSON object with a type", "INVALID_JSON"), episode, False
    kind, data = message.get("type"), message.get("data") or {}
    if kind == "close":
        return {}, episode, True
    if kind not in ("reset", "step", "state"):
        return _error(f"Unknown message type: {kind!r}", "UNKNOWN_TYPE"), episode, False
    if kind != "reset" and episode is None:
        return _error("no episode: send a reset first", "SESSION_ERROR"), episode, False
    tenant, manager = driver.tenant, driver.episodes.manager
    try:
        tenant.admit()
        with tenant.slot():
            if kind == "reset":
                previous = episode
                episode, result = await driver.reset(OpenEnvReset.model_validate(data))
                if previous is not None:
                    with contextlib.suppress(NotFoundError):
                        await manager.close(previous, tenant=tenant.name)
                return {"type": "observation", "data": result.model_dump()}, episode, False
            assert episode is not None
            if kind == "step":
                action = OpenEnvAction.model_validate(data)
                result = await driver.step(episode, episode, action)
                return {"type": "observation", "data": result.model_dump()}, episode, False
            state = driver.state(episode, episode)
            return {"type": "state", "data": state.model_dump()}, episode, False
    except ValidationError as exc:
        return _error(str(exc), "VALIDATION_ERROR"), episode, False
    except SandboxError as exc:
        status, code = status_and_code(exc)
        if status >= 500:
            logger.warning("openenv %s: %s: %s", driver.task, code, exc)
        return _error(str(exc), "CAPACITY_REACHED" if status == 429 else code), episode, False
