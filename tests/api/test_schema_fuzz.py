"""Schemathesis against the service's own OpenAPI schema: no 500s, no schema violations.

A real ``sandbox serve`` (keys, a real Docker backend) is fuzzed over loopback
HTTP, every operation of ``/openapi.json`` in turn, with positive and negative
data. Each response must be no server error, carry a status code, a content type,
headers and a body that the schema declares for that operation, and every error
(4xx) body must be an ``ErrorBody``. Hypothesis is derandomized (no example
database), so CI sees the same examples on every run.

Bounded for a 2-core machine: a few examples per operation, no shrinking, the
coverage and stateful phases off, a timeout per request and for the whole test.
Sessions hold a container each, so the fuzzer's key is allowed one policy whose
pool has at most ``POOL_MAX`` containers, the key at most two requests at once, and
the service queues at most ``MAX_WAITING``: past that, creating a session (or
running anything) is a 429, which the schema declares. Sessions the fuzzer
manages to create are closed right after the call, and one session made by the
fixture stands in for the session ids the fuzzer would otherwise only guess
(404s), so exec, files, dir and snapshot are exercised on a live session too (and
file paths that exist in it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    ignored_auth,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from api.errors import ErrorBody
from sandbox.service.tenants import hash_key, new_key
from tests.conftest import REPO, Service

pytestmark = pytest.mark.docker

KEY = new_key()
AUTH = {"Authorization": f"Bearer {KEY}"}
_LIVE: dict[str, str] = {}
POLICY = "default"
POOL_MAX = 3
MAX_WAITING = 4
MAX_EXAMPLES = 25
REQUEST_TIMEOUT_S = 30.0
TEST_TIMEOUT_S = 60
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    ignored_auth,
]
# Every resource the schema must expose (OpenAPI tags), so the fuzzer never runs on a stub.
TAGS = {"run", "judge", "sessions", "compatibility", "pool", "audit", "health"}


@pytest.fixture(scope="module")
def fuzzed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Service:
    """The service with a small pool for ``POLICY`` and one key that may use only it."""
    root = tmp_path_factory.mktemp("fuzz")
    policies = root / "policies"
    policies.mkdir()
    policy = yaml.safe_load((REPO / "policies" / f"{POLICY}.yaml").read_text())
    policy["pool"] = {"warm": 1, "max": POOL_MAX}
    (policies / f"{POLICY}.yaml").write_text(yaml.safe_dump(policy))
    keys = root / "keys.yaml"
    entry = {"tenant": "fuzz", "key_sha256": hash_key(KEY), "policies": [POLICY]}
    keys.write_text(yaml.safe_dump({"keys": [{**entry, "max_concurrency": 2}]}))
    flags = ["--keys", str(keys), "--max-waiting", str(MAX_WAITING)]
    svc = Service(*flags, policies=policies, env={"SANDBOX_STATE_DIR": str(root / "state")})
    request.addfinalizer(svc.stop)  # also when it never gets ready
    svc.wait_ready()
    return svc


@pytest.fixture(scope="module")
def http(fuzzed: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fuzzed.url, headers=AUTH, timeout=REQUEST_TIMEOUT_S) as client:
        yield client


@pytest.fixture(scope="module")
def live_session(http: httpx.Client) -> Iterator[str]:
    """A session the fuzzer may exec in, write to, list and snapshot (but not delete)."""
    created = http.post("/v1/sessions", json={"policy": POLICY, "files": {"a.txt": "a"}})
    assert created.status_code == 201, created.text
    session_id: str = created.json()["id"]
    _LIVE["session"] = session_id
    yield session_id
    _LIVE.pop("session", None)
    http.delete(f"/v1/sessions/{session_id}")


# Values the service knows, put into half the generated bodies: random policy names,
# languages and test specs would only ever reach the 4xx answers, never the results.
KNOWN = {"policy": POLICY, "language": "python", "cwd": "/workspace"}
TESTS = {"kind": "io", "cases": [{"stdin": "", "expected_stdout": ""}]}


def _known(body: dict[str, Any]) -> dict[str, Any]:
    steered = {**body, **{key: value for key, value in KNOWN.items() if key in body}}
    if isinstance(body.get("tests"), dict):
        steered["tests"] = TESTS
    if isinstance(body.get("items"), list):  # /v1/evaluate
        steered["items"] = [_known(i) if isinstance(i, dict) else i for i in body["items"]]
    if isinstance(body.get("query"), list):  # /get_reward: one label (the tests) per query
        steered.update(prompts=None, labels=[json.dumps({"tests": TESTS})] * len(body["query"]))
    return steered


def _steer_body(body: Any) -> st.SearchStrategy[Any]:
    """The generated body, or the same with values the service knows."""
    if not isinstance(body, dict):
        return st.just(body)
    return st.sampled_from([body, _known(body)])


def _steer_session(ctx: schemathesis.HookContext, params: dict[str, Any]) -> Any:
    """Half the time, the fixture's live session instead of a guessed id (never for DELETE)."""
    live = _LIVE.get("session")
    if live is None or not params or "session_id" not in params or ctx.operation is None:
        return st.just(params)
    if ctx.operation.method.upper() == "DELETE":
        return st.just(params)  # the fixture's session must outlive the fuzzing
    return st.sampled_from([params, {**params, "session_id": live}])


def _steer_path(ctx: schemathesis.HookContext, query: dict[str, Any] | None) -> Any:
    """Half the time, a path that exists in the live session (files: a file; dir: a folder)."""
    if not query or "path" not in query or ctx.operation is None:
        return st.just(query)
    known = "a.txt" if ctx.operation.path.endswith("/files") else "/workspace"
    return st.sampled_from([query, {**query, "path": known}])


# The schema the app generates is the one it serves (checked below); loading it here lets
# pytest list one test per operation before the service is up.
schema = schemathesis.openapi.from_dict(
    create_app().openapi(),
    config=schemathesis.Config.from_dict(
        {
            "auth": {"openapi": {"HTTPBearer": {"bearer": KEY}}},
            "request-timeout": REQUEST_TIMEOUT_S,
            "phases": {"coverage": {"enabled": False}, "stateful": {"enabled": False}},
            "generation": {"max-examples": MAX_EXAMPLES, "no-shrink": True},
        }
    ),
)
schema.hook("flatmap_body")(lambda _ctx, body: _steer_body(body))
schema.hook("flatmap_path_parameters")(_steer_session)
schema.hook("flatmap_query")(_steer_path)


def test_the_served_schema_is_the_fuzzed_one(http: httpx.Client) -> None:
    served = http.get("/openapi.json")
    assert served.status_code == 200
    assert served.json() == schema.raw_schema
    operations = [op for path in schema.raw_schema["paths"].values() for op in path.values()]
    tags = {tag for operation in operations for tag in operation.get("tags", ())}
    assert tags >= TAGS, f"operations missing from the schema: {TAGS - tags}"


@pytest.mark.timeout(TEST_TIMEOUT_S)
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_conforms(
    case: schemathesis.Case, fuzzed: Service, http: httpx.Client, live_session: str
) -> None:
    response = case.call(base_url=fuzzed.url, timeout=REQUEST_TIMEOUT_S)
    try:
        case.validate_response(response, checks=CHECKS)
        if response.status_code >= 400:  # every error, declared or not, is an ErrorBody
            ErrorBody.model_validate_json(response.content)
    finally:
        if case.method == "POST" and case.path == "/v1/sessions" and response.status_code == 201:
            http.delete(f"/v1/sessions/{response.json()['id']}")
