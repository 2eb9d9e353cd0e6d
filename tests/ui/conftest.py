"""A keyed service for the console's tests: an admin and two tenants, its own state."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml

from sandbox.service.tenants import hash_key, new_key
from tests.conftest import Service

KEYS = {name: new_key() for name in ("admin", "team-a", "team-b")}


@pytest.fixture(scope="package")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """``sandbox serve`` with keys for ``admin`` (an admin), ``team-a`` and ``team-b``."""
    root = tmp_path_factory.mktemp("console")
    entries: list[dict[str, Any]] = [
        {"tenant": name, "key_sha256": hash_key(key), "admin": name == "admin"}
        for name, key in KEYS.items()
    ]
    keys = root / "keys.yaml"
    keys.write_text(yaml.safe_dump({"keys": entries}))
    svc = Service("--keys", str(keys), env={"SANDBOX_STATE_DIR": str(root / "state")})
    try:
        svc.wait_ready()
        yield svc
    finally:
        svc.stop()


def api(service: Service, tenant: str) -> httpx.Client:
    """An API client with ``tenant``'s key in its headers."""
    headers = {"Authorization": f"Bearer {KEYS[tenant]}"}
    return httpx.Client(base_url=service.url, headers=headers, timeout=60)


def run(service: Service, tenant: str, code: str) -> dict[str, Any]:
    with api(service, tenant) as http:
        response = http.post("/v1/run", json={"code": code})
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body


@contextlib.contextmanager
def logged_in(service: Service, tenant: str) -> Iterator[httpx.Client]:
    """A client holding the console's cookie for ``tenant`` (posted through the login form)."""
    with httpx.Client(base_url=service.url, timeout=60) as http:
        response = http.post("/ui/login", data={"key": KEYS[tenant]})
        assert response.status_code == 303, response.text
        yield http
