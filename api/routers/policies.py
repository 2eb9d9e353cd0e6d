"""``POST /v1/policies/reload`` (admin): re-read the policy directory while the service runs."""

from __future__ import annotations

from fastapi import APIRouter

from sandbox.errors import ForbiddenError, UnsupportedError
from sandbox.policy import PolicyChanges
from sandbox.service.platform import Platform

from ..deps import PlatformDep, TenantDep
from ..errors import error_responses
from ..routing import TextJSONRoute

router = APIRouter(prefix="/v1/policies", tags=["policies"], route_class=TextJSONRoute)


@router.post(
    "/reload", response_model=PolicyChanges, responses=error_responses(401, 403, 422, 429, 501)
)
async def reload_policies(platform: PlatformDep, tenant: TenantDep) -> PolicyChanges:
    """Validate the whole policy directory, then put it in force: what was added, changed,
    removed or left unchanged. A set that fails validation is refused (422, naming the
    file, key and fix) and the policies in force stay as they were."""
    if not tenant.config.admin:
        raise ForbiddenError("only an admin key may reload the policies")
    if not isinstance(platform, Platform):
        raise UnsupportedError(
            "policies are reloaded on a single-host service; restart a fleet's service and "
            "its host agents to change them"
        )
    return await platform.reload_policies(by=tenant.name)
