"""``GET /v1/pool``: what the warm pool holds."""

from __future__ import annotations

from fastapi import APIRouter

from sandbox.core.pool import PoolStatus

from ..deps import PlatformDep, TenantDep
from ..errors import error_responses
from ..routing import TextJSONRoute

router = APIRouter(prefix="/v1", tags=["pool"], route_class=TextJSONRoute)


@router.get("/pool", response_model=PoolStatus, responses=error_responses(401, 429))
async def pool_status(platform: PlatformDep, tenant: TenantDep) -> PoolStatus:
    """Counts per (policy, image) group: idle, busy, starting, resetting, waiting; each
    policy in force with its digest and when it was loaded. Built environments are named
    by id only to the tenants that built them (``sandbox-env`` to others)."""
    status: PoolStatus = platform.pool_status(tenant.name)
    return status
