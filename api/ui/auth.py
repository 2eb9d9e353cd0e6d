"""The console's caller: the API key from the login cookie (or the API's headers).

A browser cannot send a header on navigation, so ``/ui/login`` takes the key
once and keeps it in an HttpOnly, SameSite=Strict cookie. Pages redirect to the
login form without a valid key; the console's JSON answers 401. With no keys
configured the service is loopback only and every caller is the one admin
tenant, as on the API.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from sandbox.errors import AuthenticationError, ForbiddenError
from sandbox.service.tenants import Tenant

from ..deps import CONSOLE_COOKIE, PlatformDep, presented_key


class LoginRequired(Exception):
    """A console page was asked for without a valid key: answered with the login form."""


def _tenant(request: Request, platform: PlatformDep) -> Tenant:
    presented = request.cookies.get(CONSOLE_COOKIE) or presented_key(request)
    return platform.keyring.authenticate(presented)


async def page_tenant(request: Request, platform: PlatformDep) -> Tenant:
    """The tenant of a console page; :class:`LoginRequired` without a valid key."""
    try:
        return _tenant(request, platform)
    except AuthenticationError:
        raise LoginRequired from None


async def data_tenant(request: Request, platform: PlatformDep) -> Tenant:
    """The tenant of a console JSON call; 401 without a valid key."""
    return _tenant(request, platform)


def scope_of(tenant: Tenant, asked: str | None) -> str | None:
    """Whose data to show: an admin what it asks (None for all), anyone else its own."""
    if tenant.config.admin:
        return asked or None
    if asked and asked != tenant.name:
        raise ForbiddenError("only an admin key may see another tenant's data")
    return tenant.name


PageTenant = Annotated[Tenant, Depends(page_tenant)]
DataTenant = Annotated[Tenant, Depends(data_tenant)]
