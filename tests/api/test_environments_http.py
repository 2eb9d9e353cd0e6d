"""``/v1/environments`` and sessions in a built environment, against a real service over
loopback HTTP: a tar upload built and cached, refusals, a session reading what the
Dockerfile installed, its lowered resources, a warm pool on first use, snapshot and fork."""

from __future__ import annotations

import base64
import io
import os
import secrets
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import httpx
import pytest

from sandbox.client import AsyncSandboxClient, SandboxClient
from sandbox.host.labels import LABEL_POLICY
from tests.conftest import Service, environments_service

pytestmark = pytest.mark.docker

CONFIG = """\
image_aliases:
  "ubuntu:24.04": sandbox-base
  "python:3.13-slim": sandbox-python
disk_budget_mb: 4096
max_context_mb: 1
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with environments_service(tmp_path_factory.mktemp("state"), CONFIG) as svc:
        yield svc


@pytest.fixture(scope="module")
def http(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=300) as client:
        yield client


def tar_of(files: dict[str, bytes], *, gzip: bool = False) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if gzip else "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def upload(http: httpx.Client, body: bytes, **params: str) -> httpx.Response:
    return http.post(
        "/v1/environments",
        content=body,
        params=params,
        headers={"Content-Type": "application/x-tar"},
    )


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("task")
    nonce = secrets.token_hex(6)
    (folder / "Dockerfile").write_text(
        "FROM python:3.13-slim\n"
        f"RUN echo installed-{nonce} > /etc/task-marker\n"
        "COPY app/ /app/\n"
        "WORKDIR /app\n"
    )
    (folder / "app").mkdir()
    (folder / "app" / "notes.txt").write_text(f"from the build context {nonce}\n")
    return folder


@pytest.fixture(scope="module")
def built(service: Service, task_dir: Path) -> dict[str, object]:
    with SandboxClient(service.url) as client:
        return client.build_environment(task_dir)


def test_a_tar_upload_is_built_then_found_cached(
    http: httpx.Client, built: dict[str, object], task_dir: Path
) -> None:
    assert built["cached"] is False and str(built["image"]).startswith("sandbox-env:")
    assert any("image_aliases" in note for note in built["notes"])  # type: ignore[attr-defined]
    assert "Successfully tagged" in str(built["log_tail"])
    files = {
        "Dockerfile": (task_dir / "Dockerfile").read_bytes(),
        "app/notes.txt": (task_dir / "app" / "notes.txt").read_bytes(),
    }
    started = time.monotonic()
    again = upload(http, tar_of(files, gzip=True))
    assert again.status_code == 200, again.text
    assert again.json()["cached"] is True and again.json()["environment"] == built["environment"]
    assert time.monotonic() - started < 5
    record = http.get(f"/v1/environments/{built['environment']}")
    assert record.status_code == 200 and record.json()["workdir"] == "/app"
    assert http.get("/v1/environments/0123456789ab").status_code == 404


def test_a_dockerfile_elsewhere_in_the_archive(http: httpx.Client) -> None:
    body = tar_of({"env/Build.docker": b"FROM python:3.13-slim\nRUN true\n"})
    answer = upload(http, body, dockerfile="env/Build.docker")
    assert answer.status_code == 200, answer.text
    missing = upload(http, body, dockerfile="../etc/passwd")
    assert missing.status_code == 422 and "inside the archive" in missing.json()["message"]


def test_an_image_named_in_json(http: httpx.Client) -> None:
    answer = http.post("/v1/environments", json={"image": "python:3.13-slim"})
    assert answer.status_code == 200, answer.text
    unknown = http.post("/v1/environments", json={"image": "nosuch/thing:1"})
    assert unknown.status_code == 422
    assert "FROM nosuch/thing:1" in unknown.json()["message"]
    for bad_name in ("Not_An_Image!", "python:3.13-slim\nRUN touch /injected"):
        bad = http.post("/v1/environments", json={"image": bad_name})
        assert bad.status_code == 422 and "not an image reference" in bad.json()["message"]


def test_refusals(http: httpx.Client) -> None:
    unknown = upload(http, tar_of({"Dockerfile": b"FROM registry.example/private:2\n"}))
    assert unknown.status_code == 422
    assert "FROM registry.example/private:2" in unknown.json()["message"]
    assert "image_aliases" in unknown.json()["message"]
    big = upload(http, tar_of({"Dockerfile": b"FROM ubuntu:24.04\n", "blob": os.urandom(2 << 20)}))
    assert big.status_code == 413 and "1 MB" in big.json()["message"], big.text
    assert upload(http, b"not a tar at all").status_code == 422
    wrong = http.post("/v1/environments", content=b"x", headers={"Content-Type": "image/png"})
    assert wrong.status_code == 415
    slow = upload(
        http, tar_of({"Dockerfile": b"FROM python:3.13-slim\nRUN sleep 120\n"}), build_timeout_s="2"
    )
    assert slow.status_code == 504 and "build_timeout_s=2 s" in slow.json()["message"]


def test_a_session_runs_in_the_environment(
    http: httpx.Client, built: dict[str, object], service: Service
) -> None:
    with SandboxClient(service.url) as client:
        info = client.create_session(
            environment=str(built["environment"]), resources={"cpus": 16, "memory_mb": 256}
        )
        try:
            assert info.environment == built["environment"] and info.workdir == "/app"
            assert info.notes[-1] == "cpus 16 was lowered to the base policy's 1"
            result = client.session_exec(info.id, "cat /etc/task-marker /app/notes.txt; id -u")
            assert result.status.value == "ok", result
            lines = result.stdout.splitlines()
            assert lines[0].startswith("installed-") and "from the build context" in lines[1]
            assert lines[2] == "10001"
            # The request's lower memory is the container's limit; cpus stayed the base's.
            engine = docker.from_env()
            try:
                policy = f"default.env-{built['environment']}"
                (container,) = engine.containers.list(
                    filters={"label": f"{LABEL_POLICY}={policy}", "ancestor": str(built["image"])}
                )[:1]
                host = container.attrs["HostConfig"]
                assert host["Memory"] == 256 << 20 and host["NanoCpus"] == 10**9
                assert host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"]
            finally:
                engine.close()
        finally:
            client.close_session(info.id)
    groups = http.get("/v1/pool").json()["groups"]
    mine = [g for g in groups if g["image"] == built["image"]]
    assert len(mine) == 1 and mine[0]["warm_target"] == 1


def test_snapshot_and_fork_keep_the_environment(
    http: httpx.Client, built: dict[str, object]
) -> None:
    spec = {"environment": built["environment"], "env": {"TASK_MODE": "forked"}}
    created = http.post("/v1/sessions", json=spec)
    assert created.status_code == 201, created.text
    first = created.json()["id"]
    # The image's WORKDIR (/app) is writable, filled from the image; snapshots keep it too.
    state = "echo state-1 > progress.txt && echo edited >> /app/notes.txt"
    ran = http.post(f"/v1/sessions/{first}/exec", json={"command": state})
    assert ran.json()["status"] == "ok", ran.text
    snap = http.post(f"/v1/sessions/{first}/snapshot")
    assert snap.status_code == 201, snap.text
    snapshot_id = snap.json()["snapshot_id"]
    forks = []
    for n in (1, 2):
        fork = http.post("/v1/sessions", json={"from_snapshot": snapshot_id})
        assert fork.status_code == 201, fork.text
        assert fork.json()["environment"] == built["environment"]
        forks.append(fork.json()["id"])
        cmd = (
            f"cat progress.txt && echo fork-{n} >> progress.txt && cat /etc/task-marker "
            "&& tail -n 1 /app/notes.txt && echo $TASK_MODE"
        )
        out = http.post(f"/v1/sessions/{forks[-1]}/exec", json={"command": cmd}).json()
        assert out["status"] == "ok", out
        assert out["stdout"].startswith("state-1\n") and "installed-" in out["stdout"]
        assert out["stdout"].endswith("edited\nforked\n")
    for fork, n in zip(forks, (1, 2), strict=True):
        read = http.get(f"/v1/sessions/{fork}/files", params={"path": "progress.txt"})
        assert read.status_code == 200
        assert base64.b64decode(read.json()["content_base64"]) == f"state-1\nfork-{n}\n".encode()
    for session in (first, *forks):
        assert http.delete(f"/v1/sessions/{session}").status_code == 204


def test_an_unknown_environment_is_not_found(http: httpx.Client) -> None:
    answer = http.post("/v1/sessions", json={"environment": "ffffffffffff"})
    assert answer.status_code == 404 and "POST /v1/environments" in answer.json()["message"]


def test_env_needs_an_environment_and_no_startup_hooks(
    http: httpx.Client, built: dict[str, object]
) -> None:
    plain = http.post("/v1/sessions", json={"env": {"A": "1"}})
    assert plain.status_code == 422 and "built environment" in plain.json()["message"]
    hook = http.post(
        "/v1/sessions", json={"environment": built["environment"], "env": {"BASH_ENV": "/x"}}
    )
    assert hook.status_code == 422 and "BASH_ENV" in hook.json()["message"]


def test_root_is_refused_under_runc_and_is_root_under_gvisor(
    http: httpx.Client, built: dict[str, object]
) -> None:
    runc = http.post("/v1/sessions", json={"environment": built["environment"], "root": True})
    assert runc.status_code == 422 and "never under runc" in runc.json()["message"]
    if "runsc-root" not in docker.from_env().info().get("Runtimes", {}):
        pytest.skip("this engine has no runsc-root runtime (make setup registers it)")
    spec = {"environment": built["environment"], "root": True, "policy": "gvisor"}
    gvisor = http.post("/v1/sessions", json=spec)
    assert gvisor.status_code == 201, gvisor.text
    assert any("commands run as root under gVisor" in n for n in gvisor.json()["notes"])
    session = gvisor.json()["id"]
    # Root writes where a Harbor task's agent does (/etc, /usr/local, /opt) and its files
    # stay there from one command to the next; the image's own files are still there.
    out = http.post(
        f"/v1/sessions/{session}/exec",
        json={
            "command": "cat /etc/task-marker; id -u; echo conf > /etc/app.conf; "
            "mkdir -p /usr/local/lib/x && echo lib > /usr/local/lib/x/y; chown 10001 /etc/app.conf"
        },
    ).json()
    assert out["status"] == "ok", out
    assert out["stdout"].startswith("installed-") and out["stdout"].endswith("\n0\n"), out
    again = http.post(
        f"/v1/sessions/{session}/exec",
        json={
            "command": "cat /etc/app.conf /usr/local/lib/x/y; "
            "python3 -c 'import os; print(os.stat(\"/etc/app.conf\").st_uid)'"
        },
        timeout=60,
    ).json()
    assert again["stdout"] == "conf\nlib\n10001\n", again["stderr"]
    # Its root cannot raw-socket nor make device nodes (NET_RAW, MKNOD are not granted).
    denied = http.post(
        f"/v1/sessions/{session}/exec",
        json={
            "command": "mknod /tmp/d c 1 3 && echo MKNOD; "
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)' "
            "2>/dev/null && echo RAW; echo done"
        },
    ).json()
    assert denied["stdout"] == "done\n", denied
    # Nor read the runner's memory (it is not dumpable), nor write past its memory limit
    # (the root file system's writes are held in the sandbox's memory).
    runner = http.post(
        f"/v1/sessions/{session}/exec",
        json={
            "command": "n=0; for p in $(pgrep -f 'm runner'); do n=$((n+1)); "
            "head -c1 /proc/$p/mem >/dev/null 2>&1 && echo READ; done; echo checked $n; "
            "dd if=/dev/zero of=/var/big bs=1M count=4096 2>/dev/null && echo WROTE"
        },
        timeout=120,
    ).json()
    first = runner["stdout"].split("\n")[0]
    assert first.startswith("checked ") and first != "checked 0", runner
    assert "READ" not in runner["stdout"] and "WROTE" not in runner["stdout"], runner
    assert runner["status"] in ("memory_limit", "nonzero_exit"), runner
    assert http.delete(f"/v1/sessions/{session}").status_code == 204


async def test_the_async_client_builds_and_runs(
    service: Service, task_dir: Path, built: dict[str, object]
) -> None:
    async with AsyncSandboxClient(service.url, timeout=300) as client:
        again = await client.build_environment(task_dir)
        assert again["cached"] is True and again["environment"] == built["environment"]
        info = await client.create_session(environment=built["environment"], env={"GREETING": "hi"})
        try:
            result = await client.session_exec(info.id, ["bash", "-c", "echo $GREETING; pwd"])
            assert result.stdout == "hi\n/workspace\n"
        finally:
            await client.close_session(info.id)
