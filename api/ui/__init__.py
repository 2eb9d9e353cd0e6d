"""The operator's console, served at ``/ui``: server-rendered pages and a small script."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse

from .auth import LoginRequired
from .pages import STATIC, router


async def _to_login(_: Request, __: Exception) -> RedirectResponse:
    return RedirectResponse("/ui/login", status_code=303)


def install(app: FastAPI) -> None:
    """Serve the console's pages, their JSON and static files on ``app``."""
    app.mount("/ui/static", STATIC, name="ui-static")
    app.include_router(router)
    app.add_exception_handler(LoginRequired, _to_login)
