"""Session snapshots against a real service over loopback HTTP: per-tenant quotas, DELETE,
the store's budget, kept on disk across a restart, and expiry."""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sandbox.service.tenants import hash_key, new_key
from tests.conftest import Service

pytestmark = pytest.mark.docker

QUOTAS: dict[str, dict[str, Any]] = {
    "snap-a": {"max_snapshots": 2},
    "snap-b": {},
    "snap-bytes": {"max_snapshot_bytes": 200_000},
    "snap-big": {"max_snapshot_bytes": None},
}
KEYS = {tenant: new_key() for tenant in QUOTAS}
BUDGET_MB = 2


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("state")


@pytest.fixture(scope="module")
def keys_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    entries = [
        {"tenant": tenant, "key_sha256": hash_key(KEYS[tenant]), **quotas}
        for tenant, quotas in QUOTAS.items()
    ]
    path = tmp_path_factory.mktemp("keys") / "keys.yaml"
    path.write_text(yaml.safe_dump({"keys": entries}))
    return path


def serve(keys_file: Path, state: Path, *, ttl_s: float = 3600) -> Service:
    svc = Service(
        "--keys",
        str(keys_file),
        "--snapshot-ttl",
        str(ttl_s),
        "--snapshot-budget-mb",
        str(BUDGET_MB),
        env={"SANDBOX_STATE_DIR": str(state)},
    )
    svc.wait_ready()
    return svc


@pytest.fixture(scope="module")
def service(keys_file: Path, state: Path) -> Iterator[Service]:
    svc = serve(keys_file, state)
    try:
        yield svc
    finally:
        svc.stop()


def client(service: Service, tenant: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {KEYS[tenant]}"}
    return httpx.Client(base_url=service.url, headers=headers, timeout=120)


def open_session(http: httpx.Client, **spec: Any) -> str:
    created = http.post("/v1/sessions", json=spec)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def with_bytes(http: httpx.Client, size: int) -> str:
    """A session whose workspace holds ``size`` random bytes (tar does not shrink them)."""
    return open_session(http, files_base64={"blob": _b64(os.urandom(size))})


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def snapshot(http: httpx.Client, session_id: str) -> httpx.Response:
    return http.post(f"/v1/sessions/{session_id}/snapshot")


def refused(answer: httpx.Response, code: str, *phrases: str) -> None:
    assert answer.status_code == 429, answer.text
    assert answer.json()["code"] == code and int(answer.headers["Retry-After"]) >= 1
    for phrase in phrases:
        assert phrase in answer.json()["message"], answer.text


def test_quotas_are_per_tenant_and_delete_frees_them(service: Service) -> None:
    with client(service, "snap-a") as a, client(service, "snap-b") as b:
        session_a = open_session(a, files={"note.txt": "from a"})
        taken = [snapshot(a, session_a) for _ in range(2)]
        assert [r.status_code for r in taken] == [201, 201], [r.text for r in taken]
        ids = [r.json()["snapshot_id"] for r in taken]
        refused(snapshot(a, session_a), "quota_exceeded", "'snap-a' keeps 2 snapshots of ")
        assert "max_snapshots is 2" in snapshot(a, session_a).json()["message"]
        # Another tenant is not held back by snap-a's quota.
        session_b = open_session(b, files={"note.txt": "from b"})
        assert snapshot(b, session_b).status_code == 201
        listed = a.get("/v1/sessions/snapshots").json()
        assert [s["id"] for s in listed] == ids and all(s["size_bytes"] > 0 for s in listed)
        assert not {s["id"] for s in b.get("/v1/sessions/snapshots").json()} & set(ids)
        # Nobody else deletes snap-a's snapshot, nor anything through a crafted id.
        assert b.delete(f"/v1/sessions/snapshots/{ids[0]}").status_code == 404
        assert b.delete("/v1/sessions/snapshots/..%2F..%2Faudit.db").status_code == 404
        assert a.delete(f"/v1/sessions/snapshots/{ids[0]}").status_code == 204
        assert a.delete(f"/v1/sessions/snapshots/{ids[0]}").status_code == 404
        assert snapshot(a, session_a).status_code == 201  # the room is free again
        restored = open_session(a, from_snapshot=ids[1])
        read = a.get(f"/v1/sessions/{restored}/files", params={"path": "note.txt"})
        assert read.json()["content_base64"] == _b64(b"from a")
        gone = a.post("/v1/sessions", json={"from_snapshot": ids[0]})
        assert gone.status_code == 404, gone.text
        for http, session_id in ((a, session_a), (a, restored), (b, session_b)):
            http.delete(f"/v1/sessions/{session_id}")


def test_max_snapshot_bytes_counts_the_tenants_bytes(service: Service) -> None:
    with client(service, "snap-bytes") as http:
        session_id = with_bytes(http, 120_000)
        first = snapshot(http, session_id)
        assert first.status_code == 201, first.text
        refused(
            snapshot(http, session_id),
            "quota_exceeded",
            "'snap-bytes' keeps 1 snapshots of ",
            "max_snapshot_bytes of 200000",
        )
        http.delete(f"/v1/sessions/snapshots/{first.json()['snapshot_id']}")
        assert snapshot(http, session_id).status_code == 201
        http.delete(f"/v1/sessions/{session_id}")


def test_the_stores_budget_is_enforced_on_disk(service: Service, state: Path) -> None:
    """The store keeps every tenant's snapshots within its budget, in the state directory."""
    with client(service, "snap-big") as http:
        session_id = with_bytes(http, 700_000)
        taken = [snapshot(http, session_id) for _ in range(2)]
        assert [r.status_code for r in taken] == [201, 201], [r.text for r in taken]
        full = snapshot(http, session_id)
        refused(full, "capacity_exhausted", "snapshot store is full", "'snap-big' keeps 2 ")
        assert f"of its {BUDGET_MB << 20} bytes" in full.json()["message"]
        stored = {p.name for p in (state / "snapshots").iterdir()}
        for answer in taken:
            snapshot_id = answer.json()["snapshot_id"]
            assert {f"{snapshot_id}.tar", f"{snapshot_id}.json"} <= stored
            assert (state / "snapshots" / f"{snapshot_id}.tar").stat().st_size > 700_000
            assert http.delete(f"/v1/sessions/snapshots/{snapshot_id}").status_code == 204
            assert f"{snapshot_id}.tar" not in {p.name for p in (state / "snapshots").iterdir()}
        assert snapshot(http, session_id).status_code == 201
        http.delete(f"/v1/sessions/{session_id}")


def test_snapshots_survive_a_restart_and_expire(
    service: Service, keys_file: Path, state: Path
) -> None:
    with client(service, "snap-b") as http:
        session_id = open_session(http, files={"kept.txt": "across restarts"})
        kept = snapshot(http, session_id).json()["snapshot_id"]
    service.stop()
    again = serve(keys_file, state, ttl_s=3)
    try:
        with client(again, "snap-b") as http:
            restored = open_session(http, from_snapshot=kept)
            read = http.get(f"/v1/sessions/{restored}/files", params={"path": "kept.txt"})
            assert read.json()["content_base64"] == _b64(b"across restarts")
            short = snapshot(http, restored).json()["snapshot_id"]
            listed = {s["id"]: s for s in http.get("/v1/sessions/snapshots").json()}
            assert listed[short]["expires_at"] - listed[short]["created_at"] == pytest.approx(3)
            give_up = time.monotonic() + 60
            while short in {s["id"] for s in http.get("/v1/sessions/snapshots").json()}:
                assert time.monotonic() < give_up, "the snapshot never expired"
                time.sleep(0.5)
            expired = http.post("/v1/sessions", json={"from_snapshot": short})
            assert expired.status_code == 404 and "expired" in expired.json()["message"]
            assert not (state / "snapshots" / f"{short}.tar").exists()
            assert kept in {s["id"] for s in http.get("/v1/sessions/snapshots").json()}
            http.delete(f"/v1/sessions/{restored}")
    finally:
        again.stop()
