"""FastAPI dependencies, aliased with Annotated: the platform, and the calling tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

from sandbox.errors import InvalidRequestError
from sandbox.service.platform import Platform
from sandbox.service.tenants import Tenant
from sandbox.telemetry import context

if TYPE_CHECKING:
    from sandbox.fleet.config import RequestKind


async def get_platform(request: Request) -> Platform:
    platform: Platform = request.app.state.platform
    return platform


PlatformDep = Annotated[Platform, Depends(get_platform)]


# Security schemes rather than plain header parameters: the OpenAPI schema then says how to
# authenticate (and clients and fuzzers do not take the key for a free-form input).
_bearer = HTTPBearer(auto_error=False, description="`Authorization: Bearer <API key>`")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="The API key.")


async def get_tenant(
    platform: PlatformDep,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    x_api_key: Annotated[str | None, Security(_api_key)],
) -> Tenant:
    """The tenant of the presented API key, one request of its rate spent.

    401 without a key when keys are configured; 429 over the key's rate. Every route
    that knows its caller depends on this, so none can skip the rate.
    """
    presented = bearer.credentials if bearer is not None else x_api_key
    tenant = platform.keyring.authenticate(presented)
    context.bind_tenant(tenant.name)
    return tenant


async def tenant_slot(tenant: Annotated[Tenant, Depends(get_tenant)]) -> AsyncIterator[Tenant]:
    """The tenant, holding one of its concurrent slots for the request (429 over quota)."""
    with tenant.slot():
        yield tenant


TenantDep = Annotated[Tenant, Depends(get_tenant)]
WorkingTenantDep = Annotated[Tenant, Depends(tenant_slot)]


CONSOLE_COOKIE = "sandbox_console_key"


def presented_key(request: HTTPConnection) -> str | None:
    """The API key a request presents: ``Authorization: Bearer``, else ``X-API-Key``."""
    bearer = request.headers.get("authorization", "")
    if bearer.lower().startswith("bearer "):
        return bearer[7:]
    return request.headers.get("x-api-key")


_REQUEST_KINDS = (("/v1/evaluate", "batch"), ("/get_reward", "batch"), ("/v1/sessions", "session"))
PRIORITY_HEADER = "X-Priority-Class"


async def bind_priority_class(request: HTTPConnection) -> None:
    """On a fleet, the request's priority class from ``X-Priority-Class`` (else the tenant's
    default): 422 for an unknown class, 403 above the tenant's. A no-op on a single host, and
    for a request without a valid key (its endpoint answers that). The tenant is identified,
    not authenticated: its endpoint spends one request of its rate, this does not. A
    connection, not a request: the app's dependencies run for WebSocket routes too."""
    platform = request.app.state.platform
    admission = getattr(platform, "admission", None)
    if admission is None:
        return
    tenant = platform.keyring.identify(presented_key(request))
    if tenant is None:
        return
    path = request.url.path
    kind = next((k for prefix, k in _REQUEST_KINDS if path.startswith(prefix)), "run")
    admission.bind(tenant.name, request.headers.get(PRIORITY_HEADER), kind)


def bind_body_class(
    request: HTTPConnection,
    platform: Platform,
    tenant: str,
    named: str | None,
    kind: RequestKind,
) -> None:
    """The request body's ``priority_class``, checked as the header is (422 unknown, 403
    above the tenant's ``max_class``) and bound in its place; 422 when the header names
    another class. A single host ignores it, as it ignores the header."""
    admission = getattr(platform, "admission", None)
    if named is None or admission is None:
        return
    header = request.headers.get(PRIORITY_HEADER)
    if header is not None and header != named:
        raise InvalidRequestError(
            f"priority_class: the body names {named!r} and the {PRIORITY_HEADER} header "
            f"{header!r}; name the class once (or the same class in both)"
        )
    admission.bind(tenant, named, kind)
