"""``/v1/tasks`` and ``/v1/episodes``: tasks driven tool call by tool call, for RL trainers.

Upload a task directory (or name a shipped task), open episodes of it, step
each with tool calls, judge it with the task's hidden tests. See
:mod:`sandbox.evals.episodes`.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from sandbox.errors import UnsupportedError
from sandbox.evals.catalog import TaskCatalog, TaskInfo
from sandbox.evals.episodes import EpisodeInfo, EpisodeManager, EpisodeResult, StepResult

from ..deps import TenantDep, WorkingTenantDep
from ..errors import error_responses
from ..responses import json_response
from ..routing import TextJSONRoute
from .environments import TAR_TYPES

tasks_router = APIRouter(prefix="/v1/tasks", tags=["episodes"], route_class=TextJSONRoute)
router = APIRouter(prefix="/v1/episodes", tags=["episodes"], route_class=TextJSONRoute)


class Episodes:
    """The service's task catalog and episode manager (``app.state.episodes``)."""

    def __init__(self, catalog: TaskCatalog, manager: EpisodeManager | None) -> None:
        self.catalog = catalog
        self._manager = manager

    @property
    def manager(self) -> EpisodeManager:
        if self._manager is None:
            raise UnsupportedError(
                "this service (a fleet front end) runs no episodes; open them against a "
                "single-host service"
            )
        return self._manager


async def get_episodes(request: Request) -> Episodes:
    episodes: Episodes = request.app.state.episodes
    return episodes


EpisodesDep = Annotated[Episodes, Depends(get_episodes)]


class EpisodeOpen(BaseModel):
    """Open an episode of a task."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(
        min_length=1, max_length=256, description="A shipped task's id, or upload:<digest>."
    )
    max_steps: int | None = Field(default=None, ge=1, description="At most the task's own.")
    timeout_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="At most the task's own."
    )
    max_output_chars: int | None = Field(
        default=None, ge=16, le=1_000_000, description="Each observation's cap (head and tail)."
    )


class ToolCall(BaseModel):
    """One tool call: ``shell`` {command, timeout_s?}, ``read_file`` {path},
    ``write_file`` {path, content}, ``done`` {message?}."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, max_length=64)
    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="An object, or its JSON text (as models emit it)."
    )


_TAR_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/x-tar": {
                "schema": {"type": "string", "format": "binary"},
                "description": "the task directory's contents (optionally gzip-compressed)",
            }
        },
    }
}


@tasks_router.post(
    "",
    response_model=TaskInfo,
    status_code=201,
    responses=error_responses(401, 413, 415, 422, 429),
    openapi_extra=_TAR_BODY,
)
async def upload_task(
    request: Request,
    episodes: EpisodesDep,
    tenant: WorkingTenantDep,
    name: Annotated[str, Query(min_length=1, max_length=100)] = "task",
) -> Response:
    """Upload a task directory (ours, Harbor's or Terminal-Bench's) as a tar; its reference
    is ``upload:<digest>`` (the same content, the same reference)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in TAR_TYPES:
        raise HTTPException(415, "send the task directory as application/x-tar (or gzip)")
    body = await request.body()
    info = await asyncio.to_thread(episodes.catalog.add, body, tenant=tenant.name, name=name)
    response = json_response(info)
    response.status_code = 201
    return response


@tasks_router.delete("/{ref}", status_code=204, responses=error_responses(401, 404, 422, 429))
async def delete_task(ref: str, episodes: EpisodesDep, tenant: WorkingTenantDep) -> Response:
    """Delete one of the caller's uploads (``upload:<digest>``), freeing its quota; episodes
    already open keep their task."""
    await asyncio.to_thread(episodes.catalog.remove, ref, tenant=tenant.name)
    return Response(status_code=204)


@tasks_router.get("", response_model=list[TaskInfo], responses=error_responses(401, 429))
async def list_tasks(episodes: EpisodesDep, tenant: TenantDep) -> list[TaskInfo]:
    """The shipped tasks, then the caller's uploads."""
    return await asyncio.to_thread(episodes.catalog.list, tenant=tenant.name)


@router.post(
    "",
    response_model=EpisodeInfo,
    status_code=201,
    responses=error_responses(401, 403, 404, 422, 429, 501, 503, 504),
)
async def open_episode(
    body: EpisodeOpen, episodes: EpisodesDep, tenant: WorkingTenantDep
) -> Response:
    """Start an episode: a session copied from the task's snapshot, with the tools to call."""
    task = await asyncio.to_thread(episodes.catalog.get, body.task, tenant=tenant.name)
    tenant.allow_policy(task.config.policy)
    info = await episodes.manager.open(
        task,
        tenant=tenant.name,
        max_steps=body.max_steps,
        timeout_s=body.timeout_s,
        max_output_chars=body.max_output_chars,
    )
    response = json_response(info.model_copy(update={"task": body.task}))
    response.status_code = 201
    return response


@router.get("/{episode_id}", response_model=EpisodeInfo, responses=error_responses(401, 404, 429))
async def get_episode(episode_id: str, episodes: EpisodesDep, tenant: TenantDep) -> EpisodeInfo:
    return episodes.manager.get(episode_id, tenant=tenant.name)


@router.post(
    "/{episode_id}/step",
    response_model=StepResult,
    responses=error_responses(401, 404, 422, 429, 503, 504),
)
async def step(
    episode_id: str, call: ToolCall, episodes: EpisodesDep, tenant: WorkingTenantDep
) -> StepResult:
    """Run one tool call in the episode's session; the policy's mistakes are observations."""
    return await episodes.manager.step(episode_id, call.tool, call.arguments, tenant=tenant.name)


@router.post(
    "/{episode_id}/judge",
    response_model=EpisodeResult,
    responses=error_responses(401, 404, 429, 503, 504),
)
async def judge(episode_id: str, episodes: EpisodesDep, tenant: WorkingTenantDep) -> EpisodeResult:
    """Run the hidden tests (once; asking again returns the same verdict) and end the session.
    ``reward`` is None when the platform failed: drop the episode, do not score it 0."""
    return await episodes.manager.judge(episode_id, tenant=tenant.name)


@router.delete("/{episode_id}", status_code=204, responses=error_responses(401, 404, 429))
async def close(episode_id: str, episodes: EpisodesDep, tenant: TenantDep) -> Response:
    """Forget the episode and close its session."""
    await episodes.manager.close(episode_id, tenant=tenant.name)
    return Response(status_code=204)
