"""``GET /v1/fleet`` (the hosts, their health and load) and ``POST /v1/fleet/drain`` (admin)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from sandbox.errors import ForbiddenError, NotFoundError
from sandbox.fleet.status import FleetStatus, HostView

from ..deps import PlatformDep, TenantDep
from ..errors import error_responses
from ..routing import TextJSONRoute

router = APIRouter(prefix="/v1/fleet", tags=["fleet"], route_class=TextJSONRoute)

DEFAULT_DRAIN_TIMEOUT_S = 300.0


class DrainRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = Field(min_length=1, max_length=200, description="A host's name or node id.")
    timeout_s: float = Field(
        default=DEFAULT_DRAIN_TIMEOUT_S,
        gt=0,
        le=3600,
        description="How long open sessions may run on before they are closed.",
    )


def _fleet(platform: Any) -> Any:
    if not hasattr(platform, "router"):
        raise NotFoundError("this service is a single host; start it with `sandbox serve --fleet`")
    return platform


@router.get("", response_model=FleetStatus, responses=error_responses(401, 404))
async def fleet_status(platform: PlatformDep, _: TenantDep) -> FleetStatus:
    """Hosts (health, load, calls routed), as `sandbox fleet status` prints them."""
    status: FleetStatus = _fleet(platform).router.status()
    return status


@router.post("/drain", response_model=HostView, responses=error_responses(401, 403, 404, 422, 503))
async def drain(request: DrainRequest, platform: PlatformDep, tenant: TenantDep) -> HostView:
    """Take a host out of rotation, let what runs there finish, then release its containers."""
    if not tenant.config.admin:
        raise ForbiddenError("only an admin key may drain a fleet host")
    view: HostView = await _fleet(platform).router.drain(request.host, request.timeout_s)
    return view
