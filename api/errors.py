"""Error responses: status and code from sandbox.errors.ERROR_CODES; never a traceback."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from sandbox.errors import ERROR_CODES, CapacityError, SandboxError, status_and_code
from sandbox.service.recent import Refusal
from sandbox.telemetry import metrics

from .deps import CONSOLE_COOKIE, presented_key

logger = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    """The body of every error response."""

    code: str
    message: str
    detail: list[dict[str, object]] | None = None


# Codes the HTTP layer answers with besides ERROR_CODES' (middleware, routing, parsing).
_HTTP_LAYER_CODES = {413: ("body_too_large",), 415: ("unsupported_media_type",)}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error statuses an operation can answer, all ``ErrorBody``.

    Declaring 422 here also replaces FastAPI's own validation-error schema, which is not
    the body we send.
    """
    responses: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        codes = [code for _, known, code in ERROR_CODES if known == status]
        codes += _HTTP_LAYER_CODES.get(status, ())
        entry: dict[str, Any] = {"model": ErrorBody, "description": "code: " + ", ".join(codes)}
        if status == 429:
            entry["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait before retrying.",
                    "required": True,
                    "schema": {"type": "integer", "minimum": 1},
                }
            }
        responses[status] = entry
    return responses


def _response(
    status: int, body: ErrorBody, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status, headers=headers)


_REFUSED = (401, 403, 429)


def _note_refusal(request: Request, status: int, code: str, message: str) -> None:
    """Keep a refusal of the caller's key for the console's tenants page."""
    platform: Any = getattr(request.app.state, "platform", None)
    refusals = getattr(platform, "refusals", None)
    if platform is None or refusals is None:
        return
    presented = presented_key(request) or request.cookies.get(CONSOLE_COOKIE)
    tenant = platform.keyring.identify(presented)
    refusals.record(
        Refusal(
            time=time.time(),
            tenant=tenant.name if tenant is not None else None,
            status=status,
            code=code,
            path=request.url.path,
            message=message[:500],
        )
    )


async def _sandbox_error(request: Request, exc: Exception) -> JSONResponse:
    status, code = status_and_code(exc)
    if status in _REFUSED:
        _note_refusal(request, status, code, str(exc))
    headers = None
    if isinstance(exc, CapacityError):
        headers = {"Retry-After": str(max(1, round(exc.retry_after)))}
        metrics.REJECTED.inc()
    if status >= 500:
        logger.warning("%s: %s", code, exc)
    return _response(status, ErrorBody(code=code, message=str(exc)), headers)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    detail = [
        {"loc": list(error.get("loc", ())), "msg": str(error.get("msg", "")), "type": error["type"]}
        for error in exc.errors()
    ]
    message = "; ".join(f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in detail)
    return _response(422, ErrorBody(code="invalid_request", message=message, detail=detail))


_HTTP_CODES = {
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
}


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:  # FastAPI could not read the body (not UTF-8, say): malformed
        message = f"{exc.detail}; send the body as UTF-8 JSON"
        return _response(422, ErrorBody(code="invalid_request", message=message))
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return _response(exc.status_code, ErrorBody(code=code, message=str(exc.detail)), exc.headers)


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    logger.exception("unexpected error", exc_info=exc)
    return _response(500, ErrorBody(code="internal_error", message="internal error; see the log"))


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(SandboxError, _sandbox_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
