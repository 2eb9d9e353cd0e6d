"""FastAPI dependencies, aliased with Annotated."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from sandbox.platform import Platform

ANONYMOUS_TENANT = "anonymous"


async def get_platform(request: Request) -> Platform:
    platform: Platform = request.app.state.platform
    return platform


async def get_tenant() -> str:
    """The tenant a request acts for (API keys name tenants; without keys, one tenant)."""
    return ANONYMOUS_TENANT


PlatformDep = Annotated[Platform, Depends(get_platform)]
TenantDep = Annotated[str, Depends(get_tenant)]
