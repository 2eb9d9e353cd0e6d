"""Every HTTP route refuses a JSON body that is not valid text (``api/routing.py``)."""

from __future__ import annotations

import importlib
import pkgutil

from fastapi import APIRouter
from fastapi.routing import APIRoute

import api.routers
from api.routing import TextJSONRoute


def test_every_route_checks_its_body_is_text() -> None:
    routes: list[APIRoute] = []
    for info in pkgutil.iter_modules(api.routers.__path__):
        router = getattr(importlib.import_module(f"api.routers.{info.name}"), "router", None)
        if isinstance(router, APIRouter):
            routes += [route for route in router.routes if isinstance(route, APIRoute)]
    assert len(routes) > 10
    plain = [route.path for route in routes if not isinstance(route, TextJSONRoute)]
    assert not plain, f"routes without route_class=TextJSONRoute: {plain}"
