"""What RL frameworks already speak: SandboxFusion's ``/run_code``, OpenRLHF's ``/get_reward``."""

from __future__ import annotations

from fastapi import APIRouter

from sandbox.compat import RewardRequest, RewardResponse, RunCodeRequest, RunCodeResponse
from sandbox.compat import get_reward as judge_rewards
from sandbox.compat import run_code as run_sandboxfusion

from ..deps import PlatformDep, WorkingTenantDep
from ..errors import error_responses

router = APIRouter(tags=["compatibility"])


@router.post(
    "/run_code",
    response_model=RunCodeResponse,
    responses=error_responses(401, 403, 404, 413, 415, 422, 429, 503, 504),
)
async def run_code(
    request: RunCodeRequest, platform: PlatformDep, tenant: WorkingTenantDep
) -> RunCodeResponse:
    """SandboxFusion-compatible: verl's sandbox-fusion reward code works by changing its URL."""
    tenant.allow_policy("default")
    return await run_sandboxfusion(platform.execution, request, tenant=tenant.name)


@router.post(
    "/get_reward",
    response_model=RewardResponse,
    responses=error_responses(401, 403, 404, 413, 415, 422, 429, 503, 504),
)
async def get_reward(
    request: RewardRequest, platform: PlatformDep, tenant: WorkingTenantDep
) -> RewardResponse:
    """OpenRLHF remote-reward-compatible; each label carries the hidden tests."""
    return await judge_rewards(
        platform.judge, request, tenant=tenant.name, allow_policy=tenant.allow_policy
    )
