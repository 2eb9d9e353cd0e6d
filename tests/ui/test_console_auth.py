"""The console's auth and escaping over plain HTTP against a real keyed service."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.conftest import Service
from tests.ui.conftest import KEYS, api, logged_in, run

pytestmark = pytest.mark.docker


def test_without_a_key_pages_redirect_to_login_and_data_is_401(console: Service) -> None:
    with httpx.Client(base_url=console.url, timeout=30) as http:
        page = http.get("/ui/executions")
        assert page.status_code == 303 and page.headers["location"] == "/ui/login"
        assert http.get("/ui/api/overview").status_code == 401
        assert http.get("/ui/login").status_code == 200
        wrong = http.post("/ui/login", data={"key": "sbx_not-a-key"})
        assert wrong.status_code == 401 and "unknown API key" in wrong.text
        assert "sandbox_console_key" not in wrong.headers.get("set-cookie", "")


def test_login_sets_an_http_only_strict_cookie(console: Service) -> None:
    with httpx.Client(base_url=console.url, timeout=30) as http:
        response = http.post("/ui/login", data={"key": KEYS["team-a"]})
        assert response.status_code == 303
        cookie = response.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert http.get("/ui/api/overview").status_code == 200
        assert "tenant: team-a" in http.get("/ui").text


def test_a_tenant_sees_only_its_own_executions(console: Service) -> None:
    with logged_in(console, "team-a") as http:
        calls_before = http.get("/ui/api/overview").json()["calls"]["by_class"]
    run(console, "team-b", "print('b-secret-output')")
    run(console, "team-a", "print('a-output')")
    with api(console, "team-b") as http:
        assert http.post("/v1/run", json={"code": "1", "policy": "no-such"}).status_code == 404
    with logged_in(console, "team-a") as http:  # team-b's refusal is not in team-a's figures
        figures = http.get("/ui/api/overview").json()
    assert figures["calls"]["by_class"]["refused"] <= calls_before["refused"]
    assert figures["model"] is None  # the runs' usage is the operator's
    with logged_in(console, "admin") as http:
        figures = http.get("/ui/api/overview").json()
    assert figures["calls"]["by_class"]["refused"] >= 1
    assert sum(figures["calls"]["by_class"].values()) == figures["calls"]["count"]
    with logged_in(console, "team-b") as http:
        ids = re.findall(r'href="/ui/executions/(\d+)"', http.get("/ui/executions").text)
    b_id = ids[0]
    with logged_in(console, "team-a") as http:
        listing = http.get("/ui/executions").text
        assert "<td>team-a</td>" in listing and "<td>team-b</td>" not in listing
        assert http.get(f"/ui/executions/{b_id}").status_code == 404
        assert http.get("/ui/executions", params={"tenant": "team-b"}).status_code == 403
        assert http.get("/ui/audit", params={"tenant": "team-b"}).status_code == 403
        assert http.get("/ui/evaluations").status_code == 403  # runs are the operator's
        refusals = http.get("/ui/tenants").text  # the refusals above, as team-a's
        assert "only an admin key may see another tenant&#x27;s data" in refusals
    with logged_in(console, "admin") as http:
        everyone = http.get("/ui/executions").text
        assert "<td>team-a</td>" in everyone and "<td>team-b</td>" in everyone
        detail = http.get(f"/ui/executions/{b_id}").text
        assert "b-secret-output" in detail


def test_hostile_stdout_is_escaped(console: Service) -> None:
    hostile = "<script>window.pwned = 1</script><img src=x onerror=alert(1)>"
    run(console, "team-a", f"print({hostile!r})")
    with logged_in(console, "team-a") as http:
        listing = http.get("/ui/executions").text
        newest = re.findall(r'href="/ui/executions/(\d+)"', listing)[0]
        response = http.get(f"/ui/executions/{newest}")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert "<script>window.pwned" not in response.text and "<img src=x" not in response.text
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;&lt;img src=x" in response.text


def test_judged_submissions_are_never_recorded(console: Service) -> None:
    """The hidden tests of a judgement must not show up in the console's executions."""
    secret = "hidden-case-7177"
    tests = {
        "kind": "function",
        "entry_point": "echo",
        "cases": [{"args": [secret], "expected": secret}],
    }
    code = f"def echo(x):\n    print({secret!r})\n    return x\n"
    with api(console, "team-a") as http:
        response = http.post("/v1/judge", json={"code": code, "tests": tests})
        assert response.status_code == 200 and response.json()["reward"] == 1.0
    with logged_in(console, "admin") as http:
        for execution_id in re.findall(
            r'href="/ui/executions/(\d+)"', http.get("/ui/executions").text
        ):
            assert secret not in http.get(f"/ui/executions/{execution_id}").text
