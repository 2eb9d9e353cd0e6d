"""``/v1/environments``: build a task's environment (a tar of its build context, or an image)."""

from __future__ import annotations

import asyncio
import functools
import logging
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException

from sandbox.environments import EnvironmentBuilder, EnvironmentRecord, EnvironmentSpec
from sandbox.environments.build import EnvironmentBuilt
from sandbox.environments.upload import dockerfile_in, unpack_context
from sandbox.errors import InvalidRequestError, UnsupportedError

from ..deps import PlatformDep, TenantDep, WorkingTenantDep
from ..errors import error_responses
from ..responses import json_response
from ..routing import TextJSONRoute

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/environments", tags=["environments"], route_class=TextJSONRoute)

TAR_TYPES = ("application/x-tar", "application/gzip", "application/x-gzip", "application/tar")
MAX_BUILD_TIMEOUT_S = 7200.0


class ImageBody(BaseModel):
    """A JSON body naming an image (aliases applied) instead of uploading a build context."""

    model_config = ConfigDict(extra="forbid")

    image: str = Field(min_length=1, max_length=256)


def _builder(platform: object) -> EnvironmentBuilder:
    builder = getattr(platform, "environments", None)
    if not isinstance(builder, EnvironmentBuilder):
        raise UnsupportedError(
            "this service (a fleet front end) does not build or route task environments; "
            "build and run them against a single-host service"
        )
    return builder


_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/x-tar": {
                "schema": {"type": "string", "format": "binary"},
                "description": "the build context (optionally gzip-compressed)",
            },
            "application/json": {"schema": ImageBody.model_json_schema()},
        },
    }
}


@router.post(
    "",
    response_model=EnvironmentBuilt,
    responses=error_responses(401, 404, 413, 415, 422, 429, 501, 503, 504),
    openapi_extra=_BODY,
)
async def build(
    request: Request,
    platform: PlatformDep,
    tenant: WorkingTenantDep,
    dockerfile: Annotated[str, Query(max_length=1024)] = "Dockerfile",
    build_timeout_s: Annotated[float | None, Query(gt=0, le=MAX_BUILD_TIMEOUT_S)] = None,
) -> Response:
    """Build (or find built) an environment from a tar of its build context, or a JSON image."""
    builder = _builder(platform)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    with tempfile.TemporaryDirectory(prefix="sandbox-upload-") as tmp:
        if content_type in TAR_TYPES:
            context = Path(tmp)
            await asyncio.to_thread(
                unpack_context, body, context, max_bytes=builder.config.max_context_mb << 20
            )
            spec = EnvironmentSpec(dockerfile=dockerfile_in(context, dockerfile), context=context)
        elif content_type == "application/json":
            try:
                named = ImageBody.model_validate_json(body)
            except ValidationError as exc:
                raise InvalidRequestError(
                    f'the JSON body names an image: {{"image": "python:3.13-slim"}} ({exc})'
                ) from None
            spec = EnvironmentSpec(image=named.image)
        else:
            raise HTTPException(
                415,
                "send the build context as application/x-tar (optionally gzip-compressed), or "
                'application/json {"image": "..."}',
            )
        if build_timeout_s is not None:
            spec = spec.model_copy(update={"build_timeout_s": build_timeout_s})
        result = await asyncio.to_thread(
            functools.partial(builder.build, spec, tenant=tenant.name, progress=logger.info)
        )
    return json_response(result.answer())


@router.delete(
    "/{environment}",
    status_code=204,
    responses=error_responses(401, 404, 422, 429, 501),
)
async def delete(environment: str, platform: PlatformDep, tenant: WorkingTenantDep) -> Response:
    """Stop using an environment this tenant built, freeing its max_environments (the image
    goes with the last tenant's delete; another tenant's id answers 404)."""
    builder = _builder(platform)
    await asyncio.to_thread(builder.delete, environment, tenant=tenant.name)
    return Response(status_code=204)


@router.get(
    "/{environment}",
    response_model=EnvironmentRecord,
    responses=error_responses(401, 404, 429, 501),
)
async def get(environment: str, platform: PlatformDep, tenant: TenantDep) -> EnvironmentRecord:
    """An environment this tenant built: its image, bases, notes, build time and the end of
    its log (another tenant's id answers 404, as an id never built does)."""
    return _builder(platform).get(environment, tenant=tenant.name)
