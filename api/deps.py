"""FastAPI dependencies, aliased with Annotated: the platform, and the calling tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Header, Request

from sandbox.platform import Platform
from sandbox.tenants import Tenant


async def get_platform(request: Request) -> Platform:
    platform: Platform = request.app.state.platform
    return platform


PlatformDep = Annotated[Platform, Depends(get_platform)]


async def get_tenant(
    platform: PlatformDep,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Tenant:
    """The tenant of the presented API key (401 without one when keys are configured)."""
    presented = x_api_key
    if authorization and authorization.lower().startswith("bearer "):
        presented = authorization[7:].strip()
    return platform.keyring.authenticate(presented)


async def tenant_slot(tenant: Annotated[Tenant, Depends(get_tenant)]) -> AsyncIterator[Tenant]:
    """The tenant, holding one of its concurrent slots for the request (429 over quota)."""
    with tenant.slot():
        yield tenant


TenantDep = Annotated[Tenant, Depends(get_tenant)]
WorkingTenantDep = Annotated[Tenant, Depends(tenant_slot)]
