"""ASGI middleware around every HTTP call: its request id, its span, its figures.

The id is the client's ``X-Request-ID`` when that is safe (see
:func:`sandbox.telemetry.context.accept_request_id`), else a fresh one; it is
sent back in the response's ``X-Request-ID``, put on every log line logged
while the call is served, and on the call's ``request`` span. When the call
ends it is counted in ``sandbox_calls_total{route,class}`` and timed in
``sandbox_call_seconds{route}``: class ``refused`` for a 4xx, ``infra`` for a
5xx or an infrastructure failure noted below (an ``infra_error`` result),
``user`` when the user's code failed (noted by the execution and the judge),
else ``ok``; and kept, with its tenant, in a ring of recent calls for the console.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sandbox.service.recent import RecentCalls
from sandbox.telemetry import context, metrics, tracing

REQUEST_ID_HEADER = "X-Request-ID"
_HEADER = REQUEST_ID_HEADER.lower().encode()
UNMATCHED = "unmatched"


def call_class(status: int, noted: context.FailureClass | None) -> str:
    """The class a call is counted in, from its HTTP status and the failure noted while served."""
    if status >= 500:
        return "infra"
    if status >= 400:
        return "refused"
    return noted or "ok"


class CallObserver:
    """Request id, ``request`` span and per-route call figures for every HTTP request."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute], calls: RecentCalls) -> None:
        self.app = app
        self.routes = routes  # the app's (for the route of a call refused before routing)
        self.calls = calls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        presented = next((v for n, v in scope["headers"] if n == _HEADER), b"")
        request_id = context.accept_request_id(presented.decode("latin-1"))
        call, token = context.begin(request_id)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(n, v) for n, v in message.get("headers", []) if n != _HEADER]
                headers.append((_HEADER, request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            with tracing.span(
                "request", request_id=request_id, method=scope["method"], path=scope["path"]
            ) as span:
                try:
                    await self.app(scope, receive, send_with_id)
                finally:
                    kind = call_class(status, call.failure)
                    route = self._route(scope)
                    span.set(route=route, tenant=call.tenant, status=status, **{"class": kind})
                    seconds = time.perf_counter() - started
                    metrics.record_call(route, kind, seconds)
                    self.calls.record(route, call.tenant, kind, seconds)
        finally:
            context.end(token)

    def _route(self, scope: Scope) -> str:
        route = scope.get("route")
        if route is None:  # refused before routing (a body too large), or a copied scope
            route = next((r for r in self.routes if r.matches(scope)[0] is Match.FULL), None)
        return getattr(route, "path", None) or UNMATCHED
