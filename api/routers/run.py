"""``POST /v1/run``: run one program."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from sandbox.core.execution import RunRequest
from sandbox.results import RunResult

from ..deps import PlatformDep, WorkingTenantDep, bind_body_class
from ..errors import error_responses
from ..responses import json_response
from ..routing import TextJSONRoute

router = APIRouter(prefix="/v1", tags=["run"], route_class=TextJSONRoute)


@router.post(
    "/run",
    response_model=RunResult,
    responses=error_responses(401, 403, 404, 413, 415, 422, 429, 503, 504),
)
async def run(
    request: RunRequest, http: Request, platform: PlatformDep, tenant: WorkingTenantDep
) -> Response:
    """Run ``code`` in ``language`` under ``policy``; user-code failures are statuses."""
    tenant.allow_policy(request.policy)
    bind_body_class(http, platform, tenant.name, request.priority_class, "run")
    result = await platform.execution.run(request, tenant=tenant.name)
    return json_response(RunResult.from_exec(result))
