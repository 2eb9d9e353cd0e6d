"""``/v1/sessions``: multi-step sessions for agents, their files, and snapshots."""

from __future__ import annotations

import base64
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from sandbox.core.sessions import Command, DirEntry, SessionInfo, SessionSpec
from sandbox.core.snapshots import SnapshotInfo
from sandbox.core.validation import FileMap, RelativePath
from sandbox.results import RunResult

from ..deps import PlatformDep, TenantDep, WorkingTenantDep, bind_body_class
from ..errors import error_responses
from ..responses import json_response
from ..routing import TextJSONRoute

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], route_class=TextJSONRoute)


class FilesBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    files: FileMap = Field(default_factory=dict, description="path -> text")
    files_base64: dict[RelativePath, str] = Field(
        default_factory=dict, description="path -> base64"
    )


class FileContent(BaseModel):
    path: str
    content_base64: str


class SnapshotCreated(BaseModel):
    snapshot_id: str


@router.post(
    "",
    response_model=SessionInfo,
    status_code=201,
    responses=error_responses(401, 403, 404, 413, 415, 422, 429, 503, 504),
)
async def create(
    spec: SessionSpec, http: Request, platform: PlatformDep, tenant: WorkingTenantDep
) -> Response:
    """Start a session (optionally from a snapshot), write its files, run its set-up."""
    tenant.allow_policy(spec.policy)
    bind_body_class(http, platform, tenant.name, spec.priority_class, "session")
    session = await platform.sessions.create(spec, tenant=tenant.name)
    response = json_response(session.info())
    response.status_code = 201
    return response


@router.get("", response_model=list[SessionInfo], responses=error_responses(401, 429))
async def list_sessions(platform: PlatformDep, tenant: TenantDep) -> list[SessionInfo]:
    return [s.info() for s in platform.sessions.sessions_of(tenant.name)]


# Before "/{session_id}", which would take "snapshots" for a session id.
@router.get("/snapshots", response_model=list[SnapshotInfo], responses=error_responses(401, 429))
async def list_snapshots(platform: PlatformDep, tenant: TenantDep) -> list[SnapshotInfo]:
    """The caller's snapshots, oldest first, with their sizes and when they expire."""
    return platform.sessions.snapshots.snapshots_of(tenant.name)


@router.delete(
    "/snapshots/{snapshot_id}", status_code=204, responses=error_responses(401, 404, 422, 429)
)
async def delete_snapshot(snapshot_id: str, platform: PlatformDep, tenant: TenantDep) -> Response:
    """Forget a snapshot; its room in the tenant's quota is free at once."""
    platform.sessions.snapshots.delete(snapshot_id, tenant=tenant.name)
    return Response(status_code=204)


@router.get(
    "/{session_id}", response_model=SessionInfo, responses=error_responses(401, 404, 422, 429)
)
async def get(session_id: str, platform: PlatformDep, tenant: TenantDep) -> SessionInfo:
    return platform.sessions.get(session_id, tenant=tenant.name).info()


@router.post(
    "/{session_id}/exec",
    response_model=RunResult,
    responses=error_responses(401, 404, 413, 415, 422, 429, 503, 504),
)
async def exec_command(
    session_id: str, command: Command, platform: PlatformDep, tenant: WorkingTenantDep
) -> Response:
    """Run one command (argv list, or a string for ``bash -c``)."""
    result = await platform.sessions.exec(session_id, command, tenant=tenant.name)
    return json_response(RunResult.from_exec(result))


@router.put(
    "/{session_id}/files",
    status_code=204,
    responses=error_responses(401, 404, 413, 415, 422, 429, 503, 504),
)
async def write_files(
    session_id: str, body: FilesBody, platform: PlatformDep, tenant: WorkingTenantDep
) -> Response:
    """Create or replace files below /workspace as the sandbox user."""
    files = platform.sessions.files(body.files, body.files_base64)
    await platform.sessions.write_files(session_id, files, tenant=tenant.name)
    return Response(status_code=204)


@router.get(
    "/{session_id}/files",
    response_model=FileContent,
    responses=error_responses(401, 404, 422, 429, 503, 504),
)
async def read_file(
    session_id: str,
    platform: PlatformDep,
    tenant: WorkingTenantDep,
    path: Annotated[str, Query(max_length=1024)],
) -> FileContent:
    """A file below /workspace or /tmp, as bytes (base64); links refused."""
    data = await platform.sessions.read_file(session_id, path, tenant=tenant.name)
    return FileContent(path=path, content_base64=base64.b64encode(data).decode("ascii"))


@router.get(
    "/{session_id}/dir",
    response_model=list[DirEntry],
    responses=error_responses(401, 404, 422, 429, 503, 504),
)
async def list_dir(
    session_id: str,
    platform: PlatformDep,
    tenant: WorkingTenantDep,
    path: Annotated[str, Query(max_length=1024)] = "/workspace",
) -> list[DirEntry]:
    return await platform.sessions.list_dir(session_id, path, tenant=tenant.name)


@router.post(
    "/{session_id}/snapshot",
    response_model=SnapshotCreated,
    status_code=201,
    responses=error_responses(401, 404, 422, 429, 503, 504),
)
async def snapshot(
    session_id: str, platform: PlatformDep, tenant: WorkingTenantDep
) -> SnapshotCreated:
    """Keep the workspace; start new sessions from it with ``from_snapshot``."""
    return SnapshotCreated(
        snapshot_id=await platform.sessions.snapshot(session_id, tenant=tenant.name)
    )


@router.delete("/{session_id}", status_code=204, responses=error_responses(401, 404, 422, 429))
async def close(session_id: str, platform: PlatformDep, tenant: TenantDep) -> Response:
    platform.sessions.get(session_id, tenant=tenant.name)
    await platform.sessions.close(session_id, tenant=tenant.name)
    return Response(status_code=204)
