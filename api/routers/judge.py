"""``POST /v1/judge`` (one submission) and ``POST /v1/evaluate`` (a batch, streamed as NDJSON)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import StreamingResponse

from sandbox.judge.batches import EvaluateRequest
from sandbox.judge.judge import JudgeRequest, JudgeResult

from ..deps import PlatformDep, TenantDep, WorkingTenantDep, bind_body_class
from ..errors import error_responses
from ..responses import json_response
from ..routing import TextJSONRoute

router = APIRouter(prefix="/v1", tags=["judge"], route_class=TextJSONRoute)


@router.post(
    "/judge",
    response_model=JudgeResult,
    responses=error_responses(401, 403, 404, 413, 415, 422, 429, 503, 504),
)
async def judge(
    request: JudgeRequest, http: Request, platform: PlatformDep, tenant: WorkingTenantDep
) -> Response:
    """Run a submission against its hidden tests: per-test verdicts, passed/total, reward.

    An infrastructure failure gives ``reward: null`` and ``error_class: "infra"``.
    """
    tenant.allow_policy(request.policy)
    bind_body_class(http, platform, tenant.name, request.priority_class, "run")
    return json_response(await platform.judge.judge(request, tenant=tenant.name))


@router.post(
    "/evaluate",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"application/x-ndjson": {}}},
        **error_responses(401, 403, 404, 413, 415, 422, 429),
    },
)
async def evaluate(
    request: EvaluateRequest,
    http: Request,
    platform: PlatformDep,
    tenant: TenantDep,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> StreamingResponse:
    """Judge a batch; one NDJSON line per item as it finishes, then a summary line.

    Each item's tests run in one leased container. A retry with the same
    ``Idempotency-Key`` (header or field) replays or joins the first run.
    """
    if idempotency_key and not request.idempotency_key:
        request = request.model_copy(update={"idempotency_key": idempotency_key})
    for item in request.items:
        tenant.allow_policy(item.policy)
    bind_body_class(http, platform, tenant.name, request.priority_class, "batch")
    quota = tenant.config.max_concurrency
    if quota is not None and request.concurrency > quota:
        request = request.model_copy(update={"concurrency": quota})
    with tenant.slot():  # the request itself; its items count as the sandboxes they hold
        lines = platform.evaluator.start(request, tenant=tenant.name)
    return StreamingResponse(lines, media_type="application/x-ndjson")
