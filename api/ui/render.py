"""HTML for the console: every value passes through :func:`e` (outputs are hostile)."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

from fastapi.responses import HTMLResponse

PAGES = (
    ("overview", "/ui"),
    ("executions", "/ui/executions"),
    ("tenants", "/ui/tenants"),
    ("policies", "/ui/policies"),
    ("audit", "/ui/audit"),
    ("fleet", "/ui/fleet"),
    ("evaluations", "/ui/evaluations"),
    ("training", "/ui/training"),
    ("quality", "/ui/quality"),
)
# Scripts and styles only from the service itself: nothing inline runs, whatever a page shows.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def e(value: object) -> str:
    """``value`` as escaped text (``None`` as an empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def data_island(element_id: str, data: Any) -> str:
    """JSON for the page's script, in a ``<script type="application/json">`` that never runs."""
    text = json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{e(element_id)}">{text}</script>'


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, body_id: str = "") -> str:
    """A table; cells are escaped unless given as :class:`Markup`."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{cell if isinstance(cell, Markup) else e(cell)}</td>" for cell in row)
        + "</tr>"
        for row in rows
    )
    tbody = f' id="{e(body_id)}"' if body_id else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody{tbody}>{body}</tbody></table>"


class Markup(str):
    """HTML already escaped (built with :func:`e`), placed as is."""


def _cell(cell: object) -> str:
    return cell if isinstance(cell, Markup) else e(cell)


def link(href: str, text: object) -> Markup:
    return Markup(f'<a href="{e(href)}">{e(text)}</a>')


def page(title: str, body: str, *, active: str, tenant: str, status: int = 200) -> HTMLResponse:
    """A whole console page: navigation, the body, the console's script and styles."""
    nav = "".join(
        f'<a href="{href}"{" class=active" if name == active else ""}>{name}</a>'
        for name, href in PAGES
    )
    document = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{e(title)} - sandbox console</title>"
        '<link rel="icon" href="data:,">'
        '<link rel=stylesheet href="/ui/static/console.css"></head><body>'
        f"<header><strong>sandbox console</strong><nav>{nav}</nav>"
        f'<span class=who>tenant: {e(tenant)} <a href="/ui/logout">log out</a></span></header>'
        f"<main><h1>{e(title)}</h1>{body}</main>"
        '<script src="/ui/static/console.js"></script></body></html>'
    )
    return HTMLResponse(document, status_code=status, headers={"Content-Security-Policy": CSP})
