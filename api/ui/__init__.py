"""The operator's console, served at ``/ui``: server-rendered pages and a small script."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse

from sandbox.service.recent import RecentCalls

from . import runs
from .auth import LoginRequired
from .pages import STATIC, router
from .runs import DEFAULT_RUNS_DIR
from .usage import RunsUsage, RunsUsageMetrics

__all__ = ["DEFAULT_RUNS_DIR", "install"]


async def _to_login(_: Request, __: Exception) -> RedirectResponse:
    return RedirectResponse("/ui/login", status_code=303)


def install(app: FastAPI, runs_dir: Path, calls: RecentCalls) -> None:
    """Serve the console's pages, their JSON and static files on ``app``; runs below
    ``runs_dir`` for the evaluations, training and quality pages, and their model usage
    in ``/metrics`` and the overview; ``calls`` (the app's recent calls) for the
    overview's call figures."""
    app.state.runs_dir = runs_dir
    app.state.calls = calls
    app.state.runs_usage = RunsUsage(runs_dir)
    app.state.extra_metrics = [
        *getattr(app.state, "extra_metrics", []),
        RunsUsageMetrics(app.state.runs_usage).text,
    ]
    app.mount("/ui/static", STATIC, name="ui-static")
    app.include_router(router)
    app.include_router(runs.router)
    app.add_exception_handler(LoginRequired, _to_login)
