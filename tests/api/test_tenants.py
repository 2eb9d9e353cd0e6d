"""Tenants, API keys, quotas and the audit log, against a real service over loopback HTTP."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import re
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sandbox.errors import PolicyError
from sandbox.service.tenants import Keyring, hash_key, new_key
from tests.conftest import REPO, SANDBOX_BIN, Service

pytestmark = pytest.mark.docker

KEYS = {
    name: new_key()
    for name in ("team-a", "team-b", "slow", "admin", "trickle", "one", "two-sessions")
}
# Operations anyone may call: no key, so no rate of a key to spend.
PUBLIC = {("GET", "/healthz"), ("GET", "/metrics")}


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("state")


@pytest.fixture(scope="module")
def keys_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    entries: list[dict[str, Any]] = [
        {"tenant": "team-a", "policies": ["default"], "max_concurrency": 2},
        {"tenant": "team-b", "policies": ["strict"]},
        {"tenant": "slow", "rate_per_s": 2},
        {"tenant": "admin", "admin": True},
        {"tenant": "trickle", "rate_per_s": 0.01},  # one request, then one every 100 s
        {"tenant": "one", "max_concurrency": 1},
        {"tenant": "two-sessions", "max_sessions": 2},
    ]
    for entry in entries:
        entry["key_sha256"] = hash_key(KEYS[entry["tenant"]])
    path = tmp_path_factory.mktemp("keys") / "keys.yaml"
    path.write_text(yaml.safe_dump({"keys": entries}))
    return path


@pytest.fixture(scope="module")
def keyed(keys_file: Path, state: Path) -> Iterator[Service]:
    svc = Service("--keys", str(keys_file), env={"SANDBOX_STATE_DIR": str(state)})
    try:
        svc.wait_ready()
        yield svc
    finally:
        svc.stop()


def client(service: Service, tenant: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {KEYS[tenant]}"} if tenant else {}
    return httpx.Client(base_url=service.url, headers=headers, timeout=60)


def run(service: Service, tenant: str | None, code: str = "print(1)", **extra: Any) -> Any:
    with client(service, tenant) as http:
        return http.post("/v1/run", json={"code": code, **extra})


def test_no_key_or_an_unknown_key_is_401(keyed: Service) -> None:
    missing = run(keyed, None)
    assert missing.status_code == 401 and missing.json()["code"] == "unauthenticated"
    with httpx.Client(base_url=keyed.url, headers={"X-API-Key": "sbx_wrong"}) as http:
        wrong = http.post("/v1/run", json={"code": "print(1)"})
    assert wrong.status_code == 401, wrong.text
    assert run(keyed, None).json()["message"].startswith("an API key is required")


def test_a_key_opens_only_its_policies(keyed: Service) -> None:
    assert run(keyed, "team-a").json()["stdout"] == "1\n"
    forbidden = run(keyed, "team-a", policy="strict")
    assert forbidden.status_code == 403 and forbidden.json()["code"] == "forbidden"
    assert "strict" in forbidden.json()["message"]
    assert run(keyed, "team-b", policy="strict").status_code == 200
    assert run(keyed, "team-b").status_code == 403
    with client(keyed, "team-a") as http:
        judged = http.post(
            "/v1/evaluate",
            json={
                "items": [
                    {
                        "code": "print(1)",
                        "policy": "strict",
                        "tests": {"kind": "io", "cases": [{"expected_stdout": "1"}]},
                    }
                ]
            },
        )
    assert judged.status_code == 403, judged.text


def test_the_x_api_key_header_works_too(keyed: Service) -> None:
    with httpx.Client(base_url=keyed.url, headers={"X-API-Key": KEYS["team-a"]}) as http:
        assert http.post("/v1/run", json={"code": "print(2)"}).json()["stdout"] == "2\n"


def test_concurrency_quota_gives_429(keyed: Service) -> None:
    slow = "import time\ntime.sleep(1.5)\nprint('done')"
    with concurrent.futures.ThreadPoolExecutor(5) as threads:
        answers = list(threads.map(lambda _: run(keyed, "team-a", slow), range(5)))
    codes = sorted(a.status_code for a in answers)
    assert codes.count(200) >= 1 and codes.count(429) >= 1, codes
    refused = next(a for a in answers if a.status_code == 429)
    assert refused.json()["code"] == "quota_exceeded" and "Retry-After" in refused.headers
    assert all(a.json()["stdout"] == "done\n" for a in answers if a.status_code == 200)


def test_rate_limit_gives_429_with_retry_after(keyed: Service) -> None:
    answers = [run(keyed, "slow") for _ in range(6)]
    assert 429 in [a.status_code for a in answers], [a.status_code for a in answers]
    refused = next(a for a in answers if a.status_code == 429)
    assert "rate" in refused.json()["message"] and int(refused.headers["Retry-After"]) >= 1


def _operations() -> list[tuple[str, str]]:
    """Every operation the app serves (from the app itself), path parameters filled in."""
    from api.app import create_app

    paths = create_app().openapi()["paths"]
    return sorted(
        (method.upper(), re.sub(r"\{[^}]+\}", "x" * 24, path))
        for path, operations in paths.items()
        for method in operations
    )


def test_every_authenticated_route_spends_the_rate(keyed: Service) -> None:
    """Once a key's one request is spent, every operation but the public ones answers 429
    (504 on /run_code, for verl): reading the audit log or listing sessions too."""
    operations = [op for op in _operations() if op not in PUBLIC]
    assert ("GET", "/v1/audit") in operations and ("GET", "/v1/sessions") in operations
    with client(keyed, None) as anonymous:
        for method, path in operations:
            assert anonymous.request(method, path, json={}).status_code == 401, (method, path)
    with client(keyed, "trickle") as http:
        assert http.get("/v1/pool").status_code == 200  # the one request the bucket holds
        for method, path in operations:
            answer = http.request(method, path, json={})
            expected = 504 if path == "/run_code" else 429
            assert answer.status_code == expected, (method, path, answer.text)
            assert answer.json()["code"] == "quota_exceeded", (method, path)
            assert "rate" in answer.json()["message"] and int(answer.headers["Retry-After"]) >= 1


def test_run_code_over_the_rate_is_504_for_verl(keyed: Service) -> None:
    """verl's sandbox-fusion client retries only 504: a key over its rate gets one there."""
    body = {"code": "print(1)", "language": "python"}
    with client(keyed, "slow") as http:
        answers = [http.post("/run_code", json=body) for _ in range(6)]
    codes = [a.status_code for a in answers]
    assert 504 in codes and set(codes) <= {200, 504}, codes
    refused = next(a for a in answers if a.status_code == 504)
    assert refused.json()["code"] == "quota_exceeded", refused.text
    assert int(refused.headers["Retry-After"]) >= 1


def test_idempotency_keys_never_cross_tenants(keyed: Service) -> None:
    item = {
        "code": "print(input())",
        "tests": {"kind": "io", "cases": [{"stdin": "a", "expected_stdout": "a"}]},
    }
    headers = {"Idempotency-Key": "shared-key"}
    summaries = []
    for tenant in ("team-a", "admin", "team-a"):
        with client(keyed, tenant) as http:
            response = http.post("/v1/evaluate", json={"items": [item]}, headers=headers)
        assert response.status_code == 200, response.text
        summaries.append(response.text.strip().splitlines()[-1])
    first, other, again = (yaml.safe_load(s) for s in summaries)
    assert first["replayed"] is False and other["replayed"] is False  # another tenant: a fresh run
    assert again["replayed"] is True  # the same tenant: the first run, replayed


def test_another_tenants_session_is_a_404(keyed: Service) -> None:
    """A session id works only for its tenant: to every other one (admins too) it does not exist."""
    with client(keyed, "team-a") as owner:
        created = owner.post("/v1/sessions", json={"policy": "default", "files": {"a.txt": "a"}})
        assert created.status_code == 201, created.text
        session_id = created.json()["id"]
        assert len(session_id) >= 24  # 18 random bytes, URL-safe: not guessable
        try:
            for tenant in ("team-b", "admin"):
                with client(keyed, tenant) as other:
                    attempts = [
                        other.get(f"/v1/sessions/{session_id}"),
                        other.post(f"/v1/sessions/{session_id}/exec", json={"command": "ls"}),
                        other.get(f"/v1/sessions/{session_id}/files", params={"path": "a.txt"}),
                        other.post(f"/v1/sessions/{session_id}/snapshot"),
                        other.delete(f"/v1/sessions/{session_id}"),
                    ]
                    assert [r.status_code for r in attempts] == [404] * 5, [
                        r.text for r in attempts
                    ]
                    assert {r.json()["code"] for r in attempts} == {"not_found"}
                    listed = other.get("/v1/sessions").json()
                    assert session_id not in {s["id"] for s in listed}
            read = owner.get(f"/v1/sessions/{session_id}/files", params={"path": "a.txt"})
            assert read.status_code == 200, read.text  # still the owner's, untouched
        finally:
            assert owner.delete(f"/v1/sessions/{session_id}").status_code == 204


def _refused_for_quota(answer: httpx.Response, *phrases: str) -> None:
    assert answer.status_code == 429, answer.text
    assert answer.json()["code"] == "quota_exceeded", answer.text
    assert int(answer.headers["Retry-After"]) >= 1
    for phrase in phrases:
        assert phrase in answer.json()["message"], answer.text


def test_an_open_session_is_one_of_the_sandboxes_a_quota_counts(keyed: Service) -> None:
    """With max_concurrency 1, an open session is the tenant's one sandbox: no second
    session, no run beside it; another tenant is served all the while."""
    with client(keyed, "one") as http:
        session = http.post("/v1/sessions", json={})
        assert session.status_code == 201, session.text
        try:
            usage = ("'one' already holds 1 sandboxes", "max_concurrency is 1")
            _refused_for_quota(http.post("/v1/sessions", json={}), *usage)
            _refused_for_quota(http.post("/v1/run", json={"code": "print(1)"}), *usage)
            assert run(keyed, "admin").json()["stdout"] == "1\n"
        finally:
            assert http.delete(f"/v1/sessions/{session.json()['id']}").status_code == 204
        assert http.post("/v1/run", json={"code": "print(1)"}).json()["stdout"] == "1\n"


def test_concurrent_batches_share_the_tenants_quota(keyed: Service) -> None:
    """Four batches of a max_concurrency 1 key at once hold one sandbox between them (the
    pool, sampled all along, never shows two busy), and all their items are still judged."""
    item = {
        "code": "import time\ntime.sleep(0.4)\nprint(1)",
        "tests": {"kind": "io", "cases": [{"expected_stdout": "1"}]},
    }
    batch = {"items": [item] * 3, "concurrency": 4}
    busy: list[int] = []
    sampling = threading.Event()

    def sample() -> None:
        with client(keyed, "admin") as admin:
            while not sampling.is_set():
                groups = admin.get("/v1/pool").json()["groups"]
                busy.append(sum(group["busy"] for group in groups))
                time.sleep(0.05)

    def evaluate(_: int) -> dict[str, Any]:
        with client(keyed, "one") as http:
            response = http.post("/v1/evaluate", json=batch, timeout=600)
        assert response.status_code == 200, response.text
        return dict(json.loads(response.text.strip().splitlines()[-1]))

    with concurrent.futures.ThreadPoolExecutor(5) as threads:
        sampler = threads.submit(sample)
        batches = [threads.submit(evaluate, i) for i in range(4)]
        while not all(b.done() for b in batches) and not sampler.done() and len(busy) < 40:
            time.sleep(0.05)
        sampling.set()
        sampler.result()
        assert max(busy) == 1, busy
        # Meanwhile another tenant is served.
        assert run(keyed, "admin").json()["stdout"] == "1\n"
        summaries = [b.result() for b in batches]
    assert [(s["judged"], s["all_passed"]) for s in summaries] == [(3, 3)] * 4, summaries


def test_a_key_holds_at_most_max_sessions(keyed: Service) -> None:
    with client(keyed, "two-sessions") as http:
        opened = [http.post("/v1/sessions", json={}) for _ in range(2)]
        assert [r.status_code for r in opened] == [201, 201], [r.text for r in opened]
        ids = [r.json()["id"] for r in opened]
        try:
            refused = http.post("/v1/sessions", json={})
            _refused_for_quota(refused, "'two-sessions' already has 2 sessions open")
            assert "max_sessions is 2" in refused.json()["message"]
            assert http.delete(f"/v1/sessions/{ids.pop()}").status_code == 204
            again = http.post("/v1/sessions", json={})
            assert again.status_code == 201, again.text
            ids.append(again.json()["id"])
        finally:
            for session_id in ids:
                http.delete(f"/v1/sessions/{session_id}")


@pytest.mark.parametrize(
    ("entry", "key", "says"),
    [
        ({"max_session": 2}, "keys.0.max_session", "Extra inputs are not permitted"),
        ({"max_sessions": -1}, "keys.0.max_sessions", "greater than or equal to 0"),
        ({"max_snapshots": "many"}, "keys.0.max_snapshots", "valid integer"),
        ({"max_snapshot_bytes": 1.5}, "keys.0.max_snapshot_bytes", "valid integer"),
    ],
)
def test_keys_file_quota_fields_are_strict(
    tmp_path: Path, entry: dict[str, Any], key: str, says: str
) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text(yaml.safe_dump({"keys": [{"tenant": "t", "key_sha256": "a" * 64, **entry}]}))
    with pytest.raises(PolicyError) as refused:
        Keyring.from_file(path)
    assert refused.value.source == str(path) and refused.value.key == key
    assert says in str(refused.value)


def audit(service: Service, tenant: str, **params: Any) -> list[dict[str, Any]]:
    with client(service, tenant) as http:
        response = http.get("/v1/audit", params=params)
    assert response.status_code == 200, response.text
    return list(response.json())


def test_every_execution_and_judgement_is_audited_per_tenant(keyed: Service) -> None:
    code = "print('audited-a')"
    assert run(keyed, "team-a", code).status_code == 200
    with client(keyed, "team-b") as http:
        judged = http.post(
            "/v1/judge",
            json={
                "code": "print(1)",
                "policy": "strict",
                "tests": {"kind": "io", "cases": [{"expected_stdout": "2"}]},
            },
        )
    assert judged.json()["error_class"] == "wrong_answer"
    mine = audit(keyed, "team-a", kind="run")
    assert {r["tenant"] for r in mine} == {"team-a"}
    record = next(r for r in mine if r["code_sha256"] == hashlib.sha256(code.encode()).hexdigest())
    assert record["verdict"] == "ok" and record["policy"] == "default"
    assert record["language"] == "python" and record["image"].startswith("sandbox-python:")
    assert record["wall_s"] > 0 and record["duration_s"] > 0
    theirs = audit(keyed, "team-b", kind="judge")
    assert theirs and {r["tenant"] for r in theirs} == {"team-b"}
    assert theirs[0]["verdict"] == "wrong_answer" and theirs[0]["detail"].startswith("0/1")
    everyone = {r["tenant"] for r in audit(keyed, "admin", limit=1000)}
    assert {"team-a", "team-b"} <= everyone
    with client(keyed, "team-a") as http:
        snooping = http.get("/v1/audit", params={"tenant": "team-b"})
    assert snooping.status_code == 403


def test_audit_survives_restart_and_detects_tampering(
    keys_file: Path, state: Path, keyed: Service
) -> None:
    marker = "print('before-restart')"
    assert run(keyed, "team-a", marker).status_code == 200
    keyed.stop()
    again = Service("--keys", str(keys_file), env={"SANDBOX_STATE_DIR": str(state)})
    try:
        again.wait_ready()
        digest = hashlib.sha256(marker.encode()).hexdigest()
        assert any(r["code_sha256"] == digest for r in audit(again, "team-a", limit=1000))
    finally:
        again.stop()
    database = state / "audit.db"
    verify = [str(SANDBOX_BIN), "audit", "verify", "--db", str(database)]
    good = subprocess.run(verify, capture_output=True, text=True, timeout=60)
    assert good.returncode == 0 and good.stdout.startswith("ok:"), good.stdout + good.stderr
    with sqlite3.connect(database) as db:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute("UPDATE audit SET verdict = 'ok' WHERE id = 1")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute("DELETE FROM audit WHERE id = 1")
        db.execute("DROP TRIGGER audit_no_update")  # someone going around the triggers
        db.execute("UPDATE audit SET verdict = 'forged' WHERE id = 1")
    bad = subprocess.run(verify, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "BROKEN at record 1" in bad.stdout, bad.stdout


def test_without_keys_only_loopback_may_serve(tmp_path: Path) -> None:
    exposed = subprocess.run(
        [str(SANDBOX_BIN), "serve", "--host", "0.0.0.0", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
        cwd=REPO,
    )
    assert exposed.returncode == 2
    assert "no API keys are configured" in exposed.stderr and "Traceback" not in exposed.stderr


def test_keys_new_prints_a_key_and_its_hash() -> None:
    made = subprocess.run(
        [str(SANDBOX_BIN), "keys", "new", "--tenant", "t1", "--policy", "default"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("sbx_") and len(key) > 40
    assert hash_key(key) in made.stderr and key not in made.stderr
