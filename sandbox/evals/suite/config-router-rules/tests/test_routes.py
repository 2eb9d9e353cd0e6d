import importlib.util
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
HERE = Path(__file__).resolve().parent

spec = importlib.util.spec_from_file_location("original_router", HERE / "original_router.py")
router = importlib.util.module_from_spec(spec)
sys.modules["original_router"] = router
spec.loader.exec_module(router)


def expected(method, path, headers):
    h = {k.lower(): v for k, v in headers.items()}
    m = method.upper()
    if path.startswith("/static/"):
        if m in ("GET", "HEAD") and re.search(r"\.(css|js|png)$", path):
            return "cdn"
        return "web"
    if path == "/api/v2" or path.startswith("/api/v2/"):
        return "api-v2-canary" if h.get("x-canary") == "1" else "api-v2"
    if re.fullmatch(r"/api/v1/users(/[0-9]+)?", path):
        return "users-v1"
    if path == "/api/v1" or path.startswith("/api/v1/"):
        return "api-v1"
    if m == "POST" and path == "/upload":
        return "uploads"
    if path == "/admin" or path.startswith("/admin/"):
        return "admin" if h.get("x-internal") == "yes" else "deny"
    return "web"


PATHS = [
    "/",
    "/index.html",
    "/static/app.js",
    "/static/css/site.css",
    "/static/img/logo.png",
    "/static/img/logo.png.bak",
    "/static/fonts/a.woff2",
    "/static/",
    "/static",
    "/staticfiles/app.js",
    "/x/static/app.js",
    "/api/v2",
    "/api/v2/",
    "/api/v2/users/7",
    "/api/v2x",
    "/api/v20/users",
    "/api/v1",
    "/api/v1/",
    "/api/v1/users",
    "/api/v1/users/",
    "/api/v1/users/42",
    "/api/v1/users/42/orders",
    "/api/v1/users/abc",
    "/api/v1/users/4a",
    "/api/v1/orders/42",
    "/api/v1x",
    "/upload",
    "/upload/",
    "/uploads",
    "/admin",
    "/admin/",
    "/admin/users/1",
    "/administrator",
    "/api/admin",
]
METHODS = ["GET", "HEAD", "POST", "DELETE", "put"]
HEADERS = [
    {},
    {"X-Canary": "1"},
    {"x-canary": "1"},
    {"X-Canary": "0"},
    {"X-Internal": "yes"},
    {"X-INTERNAL": "yes"},
    {"X-Internal": "Yes"},
    {"X-Internal": "yes", "X-Canary": "1"},
]


@pytest.fixture(scope="module")
def rules():
    return router.load_rules((WORK / "routes.yaml").read_text())


def test_the_rules_pass_the_routers_check():
    result = subprocess.run(
        [sys.executable, str(HERE / "original_router.py"), str(WORK / "routes.yaml"), "--check"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", PATHS)
def test_every_method_and_header_combination(rules, path):
    default, ordered = rules
    wrong = []
    for method, headers in itertools.product(METHODS, HEADERS):
        want = expected(method, path, headers)
        got = router.route(default, ordered, method, path, headers)
        if got != want:
            wrong.append(f"{method} {path} {headers}: got {got}, want {want}")
    assert not wrong, "\n".join(wrong[:10])


def test_the_router_itself_is_unchanged():
    assert (WORK / "router.py").read_text() == (HERE / "original_router.py").read_text()
