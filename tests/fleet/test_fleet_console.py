"""The console on a fleet (``sandbox serve --fleet auto`` on a real Ray cluster).

Every page answers for an admin, and the fleet page lists each host the router sees,
with its state, as ``GET /v1/fleet`` gives them.
"""

from __future__ import annotations

import re

import httpx
import pytest

from tests.conftest import Service
from tests.fleet.conftest import KEYS, client

pytestmark = pytest.mark.docker

PAGES = ("/ui", "/ui/executions", "/ui/tenants", "/ui/policies", "/ui/audit", "/ui/fleet")


def test_every_page_answers_and_the_fleet_page_lists_the_hosts(fleet: Service) -> None:
    with client(fleet, "alice") as api:
        hosts = api.get("/v1/fleet").json()["hosts"]
    with httpx.Client(base_url=fleet.url, timeout=120) as http:
        login = http.post("/ui/login", data={"key": KEYS["alice"]})  # alice is an admin
        assert login.status_code == 303, login.text
        for path in PAGES:
            response = http.get(path)
            assert response.status_code == 200, f"{path}: {response.text[:500]}"
        page = http.get("/ui/fleet").text
        overview = http.get("/ui/api/overview")
    assert overview.status_code == 200, overview.text
    healthy = sum(host["state"] == "healthy" for host in hosts)
    assert f"{healthy} of {len(hosts)} hosts healthy" in page
    listed = page.split('id="hosts"', 1)[1]
    rows = dict(re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td>", listed))
    assert rows == {host["name"]: host["state"] for host in hosts}
    assert rows, page
