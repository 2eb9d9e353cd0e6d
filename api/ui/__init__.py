"""The operator's console, served at ``/ui``: server-rendered pages and a small script."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse

from . import runs
from .auth import LoginRequired
from .pages import STATIC, router
from .runs import DEFAULT_RUNS_DIR
from .usage import RunsUsageMetrics


async def _to_login(_: Request, __: Exception) -> RedirectResponse:
    return RedirectResponse("/ui/login", status_code=303)


def install(app: FastAPI, runs_dir: Path = DEFAULT_RUNS_DIR) -> None:
    """Serve the console's pages, their JSON and static files on ``app``; runs below
    ``runs_dir`` for the evaluations, training and quality pages, and their model usage
    in ``/metrics``."""
    app.state.runs_dir = runs_dir
    app.state.extra_metrics = [
        *getattr(app.state, "extra_metrics", []),
        RunsUsageMetrics(runs_dir).text,
    ]
    app.mount("/ui/static", STATIC, name="ui-static")
    app.include_router(router)
    app.include_router(runs.router)
    app.add_exception_handler(LoginRequired, _to_login)
