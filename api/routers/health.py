"""``GET /healthz`` and ``GET /metrics``."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from ..deps import PlatformDep
from ..routing import TextJSONRoute

router = APIRouter(tags=["health"], route_class=TextJSONRoute)


class Health(BaseModel):
    status: str
    policies: list[str]
    images: dict[str, str]


@router.get("/healthz", response_model=Health)
async def healthz(platform: PlatformDep) -> Health:
    """Liveness: the service is up and its pool is running."""
    return Health(status="ok", policies=list(platform.policy_names()), images=platform.images)


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def prometheus_metrics(request: Request, platform: PlatformDep) -> Response:
    """Prometheus text format: executions by status, latency histograms, pool sizes, queue depth.

    On a fleet: every healthy host's metrics with a ``host`` label, and the router's own.
    Then whatever the app's ``state.extra_metrics`` give (the console: the runs' model
    usage).
    """
    text = await platform.metrics()
    for extra in getattr(request.app.state, "extra_metrics", []):
        text += await asyncio.to_thread(extra)  # bytes, as the platform's
    return Response(text, media_type="text/plain; version=0.0.4")
