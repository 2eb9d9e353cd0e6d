"""``GET /v1/audit``: the caller's audit records (an admin key may read every tenant's)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from sandbox.errors import ForbiddenError
from sandbox.telemetry.audit import AuditRecord

from ..deps import PlatformDep, TenantDep
from ..errors import error_responses
from ..routing import TextJSONRoute

router = APIRouter(prefix="/v1", tags=["audit"], route_class=TextJSONRoute)


@router.get(
    "/audit", response_model=list[AuditRecord], responses=error_responses(401, 403, 422, 429)
)
async def audit(
    platform: PlatformDep,
    tenant: TenantDep,
    kind: Annotated[str | None, Query(max_length=32)] = None,
    since: Annotated[str | None, Query(description="ISO 8601 time, inclusive")] = None,
    until: Annotated[str | None, Query(description="ISO 8601 time, exclusive")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    of_tenant: Annotated[str | None, Query(alias="tenant")] = None,
) -> list[AuditRecord]:
    """Audited actions, newest first: runs, judgements, session commands."""
    if of_tenant is not None and of_tenant != tenant.name and not tenant.config.admin:
        raise ForbiddenError("only an admin key may read another tenant's audit records")
    scope = of_tenant if tenant.config.admin else tenant.name
    return await platform.audit_query(
        tenant=scope, kind=kind, since=since, until=until, limit=limit
    )
