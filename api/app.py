"""The FastAPI application: lifespan owns the platform; routers per resource."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI

from sandbox.core.sessions import SessionManager
from sandbox.errors import SandboxError
from sandbox.evals.catalog import TaskCatalog
from sandbox.evals.episodes import EpisodeManager
from sandbox.service.platform import Platform, PlatformSettings
from sandbox.service.recent import RecentCalls
from sandbox.telemetry import tracing

from . import errors, ui
from .deps import bind_priority_class
from .middleware import BodyPolicy
from .observe import CallObserver
from .routers import (
    audit,
    compat,
    environments,
    episodes,
    health,
    judge,
    openenv,
    policies,
    pool,
    run,
    sessions,
)
from .routers import fleet as fleet_routes

logger = logging.getLogger(__name__)


def create_app(
    settings: PlatformSettings | None = None,
    *,
    fleet: str | None = None,
    fleet_config: Any = None,
    runs_dir: Path = ui.DEFAULT_RUNS_DIR,
    reload_on_sighup: bool = False,
) -> FastAPI:
    """Build the app; the platform starts (policies checked, pool warmed) in the lifespan.

    The console (``/ui``) finds evaluation, training and quality runs below ``runs_dir``.

    With ``fleet`` (``auto`` or ``ray://HOST:10001``) the platform is the fleet of host
    agents on that Ray cluster behind the same interface, scheduled by ``fleet_config``
    (a :class:`~sandbox.fleet.config.FleetConfig`); without it Ray is never imported.
    With ``reload_on_sighup`` (``sandbox serve``: the app runs in the main thread) a SIGHUP
    reloads the policies as ``POST /v1/policies/reload`` does.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        platform: Any
        if fleet is None:
            platform = Platform(settings)
        else:
            from sandbox.fleet.facade import FleetPlatform

            platform = FleetPlatform(settings or PlatformSettings(), fleet, fleet_config)
        app.state.platform = platform
        if platform.keyring.open:
            logger.warning(
                "no API keys configured: one tenant (%r), and only loopback may reach the "
                "service; configure keys (--keys or $SANDBOX_API_KEYS_FILE) to serve others",
                platform.keyring.anonymous.name,
            )
        sessions = getattr(platform, "sessions", None)
        manager = EpisodeManager(sessions) if isinstance(sessions, SessionManager) else None
        tasks_dir = platform.settings.audit_path.parent / "tasks"
        catalog = TaskCatalog(tasks_dir, quotas=platform.keyring.quotas)
        app.state.episodes = episodes.Episodes(catalog, manager)
        hangup = reload_on_sighup and isinstance(platform, Platform)
        try:
            await platform.start()
            if hangup:
                _on_sighup(platform)
            yield
        finally:
            if hangup:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            if manager is not None:
                await manager.close_all()
            await platform.close()
            tracing.shutdown()  # the spans still batched go out

    app = FastAPI(
        title="Sandbox platform",
        version="0.1.0",
        summary="Secure code execution for RL post-training and coding-agent evaluation.",
        lifespan=lifespan,
        dependencies=[Depends(bind_priority_class)],
        # Our spans are sandbox.telemetry.tracing's; FastAPI's own would otherwise ask
        # OpenTelemetry for its providers on every request, even with tracing off.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    errors.install(app)
    app.add_middleware(BodyPolicy)
    calls = RecentCalls()
    app.add_middleware(CallObserver, routes=app.routes, calls=calls)  # outermost: every reply
    routers = (run, judge, sessions, environments, compat, pool, policies, audit, health)
    for module in (*routers, fleet_routes):
        app.include_router(module.router)
    app.include_router(episodes.tasks_router)
    app.include_router(episodes.router)
    app.state.openenv = openenv.OpenEnvNames()
    app.include_router(openenv.router)
    ui.install(app, runs_dir, calls)
    return app


SIGNAL_RELOADER = "signal:SIGHUP"  # who reloaded, in the audit log: no tenant name has a ':'


def _on_sighup(platform: Platform) -> None:
    """Reload ``platform``'s policies on SIGHUP (the loop's handler: uvicorn's own handlers
    for SIGINT and SIGTERM are left as they are). A refusal is logged and audited."""
    loop = asyncio.get_running_loop()
    reloads: set[asyncio.Task[Any]] = set()

    async def reload() -> None:
        with suppress(SandboxError):  # refused: logged and audited by the platform
            await platform.reload_policies(by=SIGNAL_RELOADER)

    def start() -> None:
        task = loop.create_task(reload(), name="policy-reload")
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    loop.add_signal_handler(signal.SIGHUP, start)
