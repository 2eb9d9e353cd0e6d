"""What RL frameworks already speak: SandboxFusion's ``/run_code``, OpenRLHF's ``/get_reward``.

Both answer "try again" in the way their clients retry: verl's sandbox-fusion code
retries only HTTP 504, so ``/run_code`` answers a saturated pool, a key over its
quota or a run the platform could not carry out with 504; OpenRLHF retries any HTTP error, so
``/get_reward`` answers samples it could not judge with 503. Both carry
``Retry-After``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from sandbox.errors import (
    CapacityError,
    InfrastructureError,
    SandboxError,
    SandboxTimeoutError,
    status_and_code,
)
from sandbox.integrations.compat import (
    RewardRequest,
    RewardResponse,
    RunCodeRequest,
    RunCodeResponse,
    UnjudgedError,
)
from sandbox.integrations.compat import get_reward as judge_rewards
from sandbox.integrations.compat import run_code as run_sandboxfusion
from sandbox.telemetry import metrics

from ..deps import PlatformDep, WorkingTenantDep
from ..errors import ErrorBody, error_responses
from ..routing import TextJSONRoute

logger = logging.getLogger(__name__)

INFRA_RETRY_AFTER_S = 5.0


def _with_retry_after(responses: dict[int | str, dict[str, Any]], status: int, why: str) -> Any:
    responses[status] = {
        **responses[status],
        "description": f"{responses[status]['description']}. {why}",
        "headers": {
            "Retry-After": {
                "description": "Seconds to wait before retrying.",
                "required": True,
                "schema": {"type": "integer", "minimum": 1},
            }
        },
    }
    return responses


def _retry_later(status: int, exc: SandboxError) -> JSONResponse:
    """An error body like every other, with ``status`` and a ``Retry-After`` header."""
    _, code = status_and_code(exc)
    retry_after = getattr(exc, "retry_after", INFRA_RETRY_AFTER_S)
    if isinstance(exc, CapacityError):
        metrics.REJECTED.inc()
    else:
        logger.warning("%s: %s", code, exc)
    return JSONResponse(
        ErrorBody(code=code, message=str(exc)).model_dump(exclude_none=True),
        status_code=status,
        headers={"Retry-After": str(max(1, round(retry_after)))},
    )


class _RetryAs504(TextJSONRoute):
    """A route whose "try again" errors, raised anywhere (the key's rate in authentication,
    the key's quota, the pool, the run), are a 504 with ``Retry-After``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def retrying_as_504(request: Request) -> Response:
            try:
                return await handle(request)
            except (CapacityError, InfrastructureError, SandboxTimeoutError) as exc:
                return _retry_later(504, exc)

        return retrying_as_504


router = APIRouter(tags=["compatibility"], route_class=TextJSONRoute)
_sandboxfusion = APIRouter(tags=["compatibility"], route_class=_RetryAs504)


@_sandboxfusion.post(
    "/run_code",
    response_model=RunCodeResponse,
    responses=_with_retry_after(
        error_responses(401, 403, 404, 413, 415, 422, 429, 503, 504),
        504,
        "Also capacity_exhausted (the pool is saturated), quota_exceeded (the key's quota "
        "or rate) and infrastructure errors: verl's sandbox-fusion client retries only 504",
    ),
)
async def run_code(request: RunCodeRequest, platform: PlatformDep, tenant: WorkingTenantDep) -> Any:
    """SandboxFusion-compatible: verl's sandbox-fusion reward code works by changing its URL.

    A saturated pool, a key over its quota or rate, or a run the platform failed even
    after retrying, is a 504 with ``Retry-After`` (verl retries nothing else).
    """
    tenant.allow_policy("default")
    return await run_sandboxfusion(platform.execution, request, tenant=tenant.name)


router.include_router(_sandboxfusion)


@router.post(
    "/get_reward",
    response_model=RewardResponse,
    responses=_with_retry_after(
        error_responses(401, 403, 404, 413, 415, 422, 429, 503, 504),
        503,
        "Also when a sample could not be judged: no reward is made up; OpenRLHF retries",
    ),
)
async def get_reward(
    request: RewardRequest, platform: PlatformDep, tenant: WorkingTenantDep
) -> Any:
    """OpenRLHF remote-reward-compatible; each label carries the hidden tests.

    Every value is a number. A sample that could not be judged (after our own retries)
    makes the whole answer a 503 with ``Retry-After``: OpenRLHF's client retries it.
    """
    try:
        return await judge_rewards(
            platform.judge, request, tenant=tenant.name, allow_policy=tenant.allow_policy
        )
    except (UnjudgedError, InfrastructureError) as exc:
        return _retry_later(503, exc)
