"""Shared fixtures: the real Docker engine, the built images, a pool, and a running service.

Nothing here is mocked: sandboxes are real containers on the local engine and
the service is a real ``sandbox serve`` process spoken to over loopback HTTP.
At the end of the session, no container of ours may be left.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import docker
import docker.errors
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sandbox.backends.docker import (
    LABEL_MANAGED,
    LABEL_OWNER,
    DockerBackend,
    owner_alive,
    owner_label,
)
from sandbox.client import SandboxClient
from sandbox.core.execution import ExecutionService
from sandbox.core.pool import Pool
from sandbox.host.images import resolve_image
from sandbox.host.launcher import SANDBOX_BIN, ServiceProcess, free_port
from sandbox.judge.judge import Judge
from sandbox.policy import Policy, parse_policy
from sandbox.service.platform import Platform, PlatformSettings

REPO = Path(__file__).resolve().parent.parent


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
    labelled = {"label": f"{LABEL_MANAGED}=1"}
    # ignore_removed: another run on the engine may remove a container between list and inspect.
    for container in client.containers.list(all=True, filters=labelled, ignore_removed=True):
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


def harbor_bin() -> Path:
    """The real ``harbor`` CLI (Python >= 3.12: a venv of its own, ``make harbor-venv``):
    ``.venv-harbor`` here, or the venv ``$SANDBOX_HARBOR_VENV`` names. A test that needs it
    fails without it (CI makes it)."""
    venv = Path(os.environ.get("SANDBOX_HARBOR_VENV", REPO / ".venv-harbor"))
    harbor = venv / "bin" / "harbor"
    if not harbor.is_file():
        pytest.fail(
            f"{harbor} is missing: make the Harbor venv with `make harbor-venv` "
            "(or point SANDBOX_HARBOR_VENV at one)"
        )
    return harbor


class Service(ServiceProcess):
    """A ``sandbox serve`` subprocess on a free loopback port (args: extra CLI flags)."""


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` (with ``labels``) in Prometheus text; 0 if none."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def judge_on(pool: Pool, policy: Policy) -> Judge:
    """A judge on ``pool`` whose only policy, ``default``, is ``policy``."""
    return Judge(ExecutionService(pool, {"default": policy}, resolve_image))


def kill_container_running(service: Service, marker: str) -> None:
    """Kill the one container of ``service`` in which a process whose command line holds
    ``marker`` runs."""
    prefix = f":{service.process.pid}:"
    engine = docker.from_env(timeout=60)
    try:
        ours = [
            c
            for c in engine.containers.list(filters={"label": LABEL_OWNER})
            if prefix in c.labels[LABEL_OWNER]
            and any(marker in p[-1] for p in c.top(ps_args="-eo pid,args")["Processes"] or [])
        ]
        assert len(ours) == 1, f"{len(ours)} containers of the service run {marker!r}"
        ours[0].kill()
    finally:
        engine.close()


def kill_session_container(service: Service, session_id: str) -> None:
    """Kill the container of one of ``service``'s sessions (an episode's: its ``session_id``).
    The marker process that finds it starts through the sessions API, so an episode's step
    count is unchanged."""
    marker = f"sleep {os.getpid()}{free_port()}"
    with SandboxClient(service.url) as client:
        started = client.session_exec(session_id, f"nohup {marker} >/dev/null 2>&1 &")
    assert started.exit_code == 0, started
    kill_container_running(service, marker)


@contextlib.contextmanager
def one_container_service(policies: Path) -> Iterator[Service]:
    """A service whose only policy (``default``) keeps one container and lets no request
    wait for it: a second concurrent request finds the pool saturated."""
    (policies / "default.yaml").write_text("pool: {warm: 1, max: 1}\n")
    with Service("--max-waiting", "0", policies=policies, log_dir=policies) as svc:
        yield svc


@contextlib.contextmanager
def environments_service(state: Path, config: str, *args: str) -> Iterator[Service]:
    """A service keeping its state in ``state`` with the environments config ``config``
    (YAML text); the environments it built are removed from the engine afterwards."""
    config_path = state / "environments.yaml"
    config_path.write_text(config)
    svc = Service(
        *args,
        env={"SANDBOX_STATE_DIR": str(state), "SANDBOX_ENVIRONMENTS_CONFIG": str(config_path)},
        log_dir=state,
    )
    try:
        svc.wait_ready()
        yield svc
    finally:
        svc.stop()
        engine = docker.from_env()
        for record in (state / "environments").glob("*.json"):
            with contextlib.suppress(docker.errors.ImageNotFound):
                engine.images.remove(f"sandbox-env:{record.stem}", force=True)
        engine.close()


__all__ = [
    "REPO",
    "SANDBOX_BIN",
    "Service",
    "environments_service",
    "free_port",
    "harbor_bin",
    "judge_on",
    "kill_container_running",
    "kill_session_container",
    "make_policy",
    "metric",
    "one_container_service",
]


@pytest.fixture(scope="module")
async def platform(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Platform]:
    """An in-process platform (nothing pre-warmed) with its own audit log, per test module."""
    state = tmp_path_factory.mktemp("platform-state")
    platform = Platform(PlatformSettings(warm=[], audit_path=state / "audit.db"))
    await platform.start()
    yield platform
    await platform.close()


@pytest.fixture(scope="session")
def service() -> Iterator[Service]:
    """The shipped policies, served on loopback for the whole session."""
    with Service() as svc:
        yield svc


@pytest.fixture(scope="session")
def http(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=60) as client:
        yield client
