"""Stored task uploads (``POST /v1/tasks``) against a real keyed service: a tenant keeps at
most its ``max_task_uploads`` and ``max_task_upload_bytes`` (429 naming what it keeps and
how to free it), deleting one frees it, the same content again is not a second upload, and
another tenant can neither list, open, nor delete them."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator

import httpx
import pytest
import yaml

from sandbox.service.tenants import hash_key, new_key
from tests.conftest import Service

pytestmark = pytest.mark.docker

KEYS = {tenant: new_key() for tenant in ("alice", "mallory")}
TASK_YAML = (
    'instruction: "write the answer"\nagent:\n  timeout_s: 30\n'
    "tests:\n  command: 'true'\n  timeout_s: 10\n"
)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    state = tmp_path_factory.mktemp("state")
    keys = state / "keys.yaml"
    entries = [
        {
            "tenant": tenant,
            "key_sha256": hash_key(key),
            "max_task_uploads": 2,
            "max_task_upload_bytes": 20_000,
        }
        for tenant, key in KEYS.items()
    ]
    keys.write_text(yaml.safe_dump({"keys": entries}))
    svc = Service("--keys", str(keys), env={"SANDBOX_STATE_DIR": str(state)}, log_dir=state)
    try:
        svc.wait_ready()
        yield svc
    finally:
        svc.stop()


def client(service: Service, tenant: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {KEYS[tenant]}"}
    return httpx.Client(base_url=service.url, headers=headers, timeout=60)


def task_tar(note: str, padding: int = 0) -> bytes:
    """A task directory (task.yaml, a tests folder, a note making its digest its own)."""
    files = {"task.yaml": TASK_YAML, "tests/note.txt": note + "x" * padding}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def upload(http: httpx.Client, body: bytes) -> httpx.Response:
    return http.post(
        "/v1/tasks",
        content=body,
        params={"name": "t"},
        headers={"Content-Type": "application/x-tar"},
    )


def test_uploads_stop_at_the_tenants_quota_and_deleting_frees_it(service: Service) -> None:
    with client(service, "alice") as alice:
        first = upload(alice, task_tar("one"))
        second = upload(alice, task_tar("two"))
        assert first.status_code == second.status_code == 201, (first.text, second.text)
        again = upload(alice, task_tar("one"))  # the same content: the same reference
        assert again.status_code == 201 and again.json()["task"] == first.json()["task"]
        third = upload(alice, task_tar("three"))
        assert third.status_code == 429, third.text
        message = third.json()["message"]
        assert "keeps 2 uploaded tasks" in message and "max_task_uploads is 2" in message
        assert "DELETE /v1/tasks/upload:" in message and third.headers.get("Retry-After")
        gone = alice.delete(f"/v1/tasks/{first.json()['task']}")
        assert gone.status_code == 204, gone.text
        refs = [t["task"] for t in alice.get("/v1/tasks").json()]
        assert first.json()["task"] not in refs and second.json()["task"] in refs
        assert upload(alice, task_tar("three")).status_code == 201
        # A shipped task is not an upload; a deleted one is gone.
        assert alice.delete(f"/v1/tasks/{first.json()['task']}").status_code == 404


def test_an_upload_past_the_byte_quota_is_refused(service: Service) -> None:
    with client(service, "mallory") as mallory:
        big = upload(mallory, task_tar("big", padding=30_000))
    assert big.status_code == 429, big.text
    assert "max_task_upload_bytes of 20000" in big.json()["message"], big.text


def test_another_tenant_cannot_see_open_or_delete_an_upload(service: Service) -> None:
    with client(service, "alice") as alice:
        refs = [t["task"] for t in alice.get("/v1/tasks").json() if t["task"].startswith("upload:")]
    assert refs
    with client(service, "mallory") as mallory:
        listed = [t["task"] for t in mallory.get("/v1/tasks").json()]
        assert not set(refs) & set(listed), listed
        for ref in refs:
            assert mallory.delete(f"/v1/tasks/{ref}").status_code == 404
            opened = mallory.post("/v1/episodes", json={"task": ref})
            assert opened.status_code == 404, opened.text
        for ref in ("upload:..", "upload:../x", "nope"):
            assert mallory.delete(f"/v1/tasks/{ref}").status_code in (404, 422), ref
    with client(service, "alice") as alice:
        still = [t["task"] for t in alice.get("/v1/tasks").json()]
    assert set(refs) <= set(still)
