"""Reloading policies while a real ``sandbox serve`` runs: ``POST /v1/policies/reload``, the
``sandbox policy reload`` command and SIGHUP, against real containers.

A lease held across a reload keeps its old rules and its container is retired after it
(never leased again); new leases get the new version (its ``env.set`` and ``open_files``
seen from inside, its ``memory_mb`` on the container); a set that fails validation is
refused whole with the loader's message and the old set stays; only admin keys reload;
every reload, applied or refused, is in the audit log with who asked.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import httpx
import pytest
import yaml

from sandbox.policy import load_policy
from sandbox.service.tenants import hash_key, new_key
from tests.conftest import SANDBOX_BIN, Service

pytestmark = pytest.mark.docker

ADMIN, USER = new_key(), new_key()
# What a sandbox tells about itself: the policy's marker, its open-files limit, and the id
# of its container (Docker bind-mounts /etc/hostname from the container's own directory).
PROBE = (
    'echo "mark=$RELOAD_MARK"; echo "nofile=$(ulimit -n)"; '
    "grep -o 'containers/[0-9a-f]*/hostname' /proc/self/mountinfo | cut -d/ -f2"
)


def write_default(policies: Path, mark: str, open_files: int, memory_mb: int = 512) -> str:
    """Write ``default.yaml``; returns its digest as the loader resolves it."""
    path = policies / "default.yaml"
    policy = {
        "resources": {"open_files": open_files, "memory_mb": memory_mb},
        "env": {"set": {"RELOAD_MARK": mark}},
        "pool": {"warm": 1, "max": 3},
    }
    path.write_text(yaml.safe_dump(policy))
    return load_policy(path).digest


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("reload-policies")
    write_default(directory, f"v1-{uuid.uuid4().hex[:8]}", 200)
    (directory / "gone.yaml").write_text("pool: {warm: 0, max: 1}\n")
    return directory


@pytest.fixture(scope="module")
def service(policies: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    state = tmp_path_factory.mktemp("reload-state")
    keys = state / "keys.yaml"
    entries = [
        {"tenant": "ops", "key_sha256": hash_key(ADMIN), "admin": True},
        {"tenant": "team", "key_sha256": hash_key(USER)},
    ]
    keys.write_text(yaml.safe_dump({"keys": entries}))
    with Service(
        "--keys", str(keys), policies=policies, log_dir=state, env={"SANDBOX_STATE_DIR": str(state)}
    ) as svc:
        yield svc


@pytest.fixture(scope="module")
def admin(service: Service) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=service.url, headers=headers, timeout=120) as client:
        yield client


def probe(answer: httpx.Response) -> dict[str, str]:
    assert answer.status_code == 200, answer.text
    out = answer.json()["stdout"]
    mark = re.search(r"mark=(\S*)", out)
    nofile = re.search(r"nofile=(\d+)", out)
    container = re.search(r"^([0-9a-f]{64})$", out, re.M)
    assert mark and nofile and container, out
    return {"mark": mark[1], "nofile": nofile[1], "container": container[1]}


def run_probe(client: httpx.Client) -> dict[str, str]:
    return probe(client.post("/v1/run", json={"language": "bash", "code": PROBE}))


def policy_versions(client: httpx.Client) -> dict[str, dict[str, Any]]:
    pool = client.get("/v1/pool")
    assert pool.status_code == 200, pool.text
    return {version["name"]: version for version in pool.json()["policies"]}


def exists(containers: docker.DockerClient, container_id: str) -> bool:
    try:
        containers.containers.get(container_id)
    except docker.errors.NotFound:
        return False
    return True


def eventually(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.25)


def last_reload(client: httpx.Client) -> dict[str, Any]:
    records = client.get("/v1/audit", params={"kind": "policy_reload", "limit": 1})
    assert records.status_code == 200, records.text
    assert records.json(), "no policy_reload record in the audit log"
    record: dict[str, Any] = records.json()[0]
    return record


def test_a_lease_across_a_reload_keeps_its_rules_and_its_container_is_retired(
    service: Service,
    admin: httpx.Client,
    policies: Path,
    docker_client: docker.DockerClient,
) -> None:
    versions = policy_versions(admin)
    old_digest = load_policy(policies / "default.yaml").digest
    assert versions["default"]["digest"] == old_digest and versions["default"]["loaded_at"]
    old_mark = yaml.safe_load((policies / "default.yaml").read_text())["env"]["set"]
    old_mark = old_mark["RELOAD_MARK"]

    opened = admin.post("/v1/sessions", json={"policy": "default"})
    assert opened.status_code == 201, opened.text
    session = opened.json()["id"]
    held = probe(admin.post(f"/v1/sessions/{session}/exec", json={"command": PROBE}))
    reused = run_probe(admin)  # reset after the run and idle: would be reused under v1
    assert held["mark"] == reused["mark"] == old_mark and held["nofile"] == "200"

    new_mark = f"v2-{uuid.uuid4().hex[:8]}"
    new_digest = write_default(policies, new_mark, 150, memory_mb=384)
    (policies / "gone.yaml").unlink()
    (policies / "added.yaml").write_text("pool: {warm: 0, max: 1}\n")
    command = [
        str(SANDBOX_BIN), "policy", "reload", "--url", service.url, "--api-key", ADMIN,
    ]  # fmt: skip
    reloaded = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert reloaded.returncode == 0, reloaded.stderr
    assert f"changed   default ({old_digest[:12]} -> {new_digest[:12]})" in reloaded.stdout
    assert "added     added" in reloaded.stdout and "removed   gone" in reloaded.stdout

    again = probe(admin.post(f"/v1/sessions/{session}/exec", json={"command": PROBE}))
    assert again == held, "the lease held across the reload changed rules or container"
    fresh = [run_probe(admin) for _ in range(3)]
    for seen in fresh:
        assert seen["mark"] == new_mark and seen["nofile"] == "150", seen
        assert seen["container"] not in {held["container"], reused["container"]}, seen
        memory = docker_client.containers.get(seen["container"]).attrs["HostConfig"]["Memory"]
        assert memory == 384 << 20
    eventually(
        lambda: not exists(docker_client, reused["container"]), "the idle v1 sandbox removed"
    )
    assert exists(docker_client, held["container"]), "a leased sandbox was taken away"

    assert admin.delete(f"/v1/sessions/{session}").status_code == 204
    eventually(
        lambda: not exists(docker_client, held["container"]),
        "the session's v1 sandbox retired after its lease",
    )
    assert run_probe(admin)["container"] != held["container"]
    versions = policy_versions(admin)
    assert sorted(versions) == ["added", "default"]
    assert versions["default"]["digest"] == new_digest
    digests = {group["digest"] for group in admin.get("/v1/pool").json()["groups"]}
    eventually(
        lambda: old_digest not in {g["digest"] for g in admin.get("/v1/pool").json()["groups"]},
        "the drained v1 group no longer listed",
    )
    assert new_digest in digests

    record = last_reload(admin)
    assert record["tenant"] == "ops" and record["verdict"] == "applied"
    changes = json.loads(record["detail"])
    assert changes["changed"] == [
        {"name": "default", "old_digest": old_digest, "new_digest": new_digest}
    ]
    assert [v["name"] for v in changes["removed"]] == ["gone"]
    assert [v["name"] for v in changes["added"]] == ["added"]


def test_a_set_that_fails_validation_is_refused_whole(
    service: Service, admin: httpx.Client, policies: Path
) -> None:
    before = policy_versions(admin)
    mark = run_probe(admin)["mark"]
    write_default(policies, "never-in-force", 100)  # valid, but its set is not
    (policies / "bad.yaml").write_text("resources: {memory_mb: '512'}\n")
    try:
        refused = admin.post("/v1/policies/reload")
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "policy_invalid"
        message = refused.json()["message"]
        assert "bad.yaml" in message and "resources.memory_mb" in message, message
        command = [str(SANDBOX_BIN), "policy", "reload", "--url", service.url, "--key", ADMIN]
        cli = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert cli.returncode == 2 and "bad.yaml" in cli.stderr, (cli.stdout, cli.stderr)
        assert policy_versions(admin) == before
        assert run_probe(admin)["mark"] == mark
        record = last_reload(admin)
        assert record["verdict"] == "refused" and "bad.yaml" in record["detail"]
    finally:
        (policies / "bad.yaml").unlink()


def test_only_an_admin_key_reloads(service: Service) -> None:
    with httpx.Client(base_url=service.url, timeout=60) as client:
        user = client.post("/v1/policies/reload", headers={"Authorization": f"Bearer {USER}"})
        anonymous = client.post("/v1/policies/reload")
    assert user.status_code == 403 and user.json()["code"] == "forbidden", user.text
    assert anonymous.status_code == 401, anonymous.text


def test_sighup_reloads_the_policies(service: Service, admin: httpx.Client, policies: Path) -> None:
    mark = f"v3-{uuid.uuid4().hex[:8]}"
    digest = write_default(policies, mark, 120)
    os.kill(service.process.pid, signal.SIGHUP)
    eventually(lambda: policy_versions(admin)["default"]["digest"] == digest, "SIGHUP reloaded")
    assert service.process.poll() is None, "SIGHUP ended the service"
    seen = run_probe(admin)
    assert seen["mark"] == mark and seen["nofile"] == "120"
    record = last_reload(admin)
    assert record["tenant"] == "signal:SIGHUP" and record["verdict"] == "applied"
