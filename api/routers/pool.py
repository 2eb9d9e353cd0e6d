"""``GET /v1/pool``: what the warm pool holds."""

from __future__ import annotations

from fastapi import APIRouter

from sandbox.pool import PoolStatus

from ..deps import PlatformDep, TenantDep

router = APIRouter(prefix="/v1", tags=["pool"])


@router.get("/pool", response_model=PoolStatus)
async def pool_status(platform: PlatformDep, _: TenantDep) -> PoolStatus:
    """Counts per (policy, image) group: idle, busy, starting, resetting, waiting."""
    return platform.pool.status()
