"""Shared fixtures: the real Docker engine, the built images, a pool, and a running service.

Nothing here is mocked: sandboxes are real containers on the local engine and
the service is a real ``sandbox serve`` process spoken to over loopback HTTP.
At the end of the session, no container of ours may be left.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import docker
import docker.errors
import httpx
import pytest

from sandbox.backends.docker import (
    LABEL_MANAGED,
    LABEL_OWNER,
    DockerBackend,
    owner_alive,
    owner_label,
)
from sandbox.images import resolve_image
from sandbox.policy import Policy, parse_policy
from sandbox.pool import Pool

REPO = Path(__file__).resolve().parent.parent
SANDBOX_BIN = Path(sys.executable).with_name("sandbox")


def make_policy(name: str = "test", **sections: object) -> Policy:
    """A policy from YAML-like sections, validated exactly like a file."""
    import yaml

    text = yaml.safe_dump(sections) if sections else "{}\n"
    if text.strip() == "{}":
        text = "runtime: runc\n"
    return parse_policy(text, name=name, source=f"<test {name}>")


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    client = docker.from_env(timeout=120)
    yield client
    client.close()


def leaked_containers(client: docker.DockerClient) -> list[str]:
    """Our containers owned by this process or by a process that no longer exists.

    Containers of other live services on the same engine are not this session's.
    """
    leaked = []
    for container in client.containers.list(all=True, filters={"label": f"{LABEL_MANAGED}=1"}):
        owner = container.labels.get(LABEL_OWNER, "")
        if owner == owner_label() or not owner_alive(owner):
            leaked.append(container.short_id)
    return leaked


@pytest.fixture(scope="session", autouse=True)
def no_containers_left_behind() -> Iterator[None]:
    """After the whole session, no container of this session may be left."""
    yield
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except docker.errors.DockerException:
        return  # no engine: nothing can have leaked
    deadline = time.monotonic() + 30
    while (left := leaked_containers(client)) and time.monotonic() < deadline:
        time.sleep(0.5)
    client.close()
    assert not left, f"containers left after the test session: {left}"


@pytest.fixture(scope="session")
def python_image() -> str:
    return resolve_image("python")


@pytest.fixture(scope="session")
async def backend() -> AsyncIterator[DockerBackend]:
    backend = DockerBackend()
    yield backend
    await backend.close()


@pytest.fixture(scope="session")
async def pool(backend: DockerBackend) -> AsyncIterator[Pool]:
    pool = Pool(backend, health_interval_s=2.0)
    await pool.start()
    yield pool
    await pool.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Service:
    """A ``sandbox serve`` subprocess on a free loopback port."""

    def __init__(self, *args: str, policies: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [str(SANDBOX_BIN), "serve", "--port", str(self.port), *args]
        if policies is not None:
            command += ["--policies", str(policies)]
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"sandbox-serve-{self.port}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"service exited early:\n{self.log()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"service not ready in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


@pytest.fixture(scope="session")
def service() -> Iterator[Service]:
    """The shipped policies, served on loopback for the whole session."""
    svc = Service()
    try:
        svc.wait_ready()
        yield svc
    finally:
        svc.stop()


@pytest.fixture(scope="session")
def http(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=60) as client:
        yield client
