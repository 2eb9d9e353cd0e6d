"""The SDK (sync and async) against a real ``sandbox serve`` process over loopback."""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandbox.client import AsyncSandboxClient, SandboxClient, folder_archive
from sandbox.core.pool import PoolStatus
from sandbox.errors import (
    CapacityError,
    InvalidRequestError,
    LimitError,
    NotFoundError,
    SandboxError,
    SandboxTimeoutError,
    ServiceUnreachableError,
)
from sandbox.results import ExecStatus, RunResult
from tests.conftest import Service, free_port, one_container_service

pytestmark = pytest.mark.docker

HOLD_S = 3.0
HOLD_CODE = f"import time\ntime.sleep({HOLD_S})\nprint('held')\n"


@pytest.fixture(scope="module")
def client(service: Service) -> Iterator[SandboxClient]:
    with SandboxClient(service.url, timeout=60) as c:
        yield c


# --------------------------------------------------------------------------- sync


def test_run(client: SandboxClient) -> None:
    result = client.run("print(sum(range(10)))")
    assert isinstance(result, RunResult)
    assert result.status is ExecStatus.OK
    assert result.exit_code == 0
    assert result.stdout == "45\n"
    assert result.usage.wall_s > 0


def test_run_with_everything(client: SandboxClient) -> None:
    result = client.run(
        "import sys\n"
        "data = open('in/data.txt').read()\n"
        "open('out.txt', 'w').write(data + sys.stdin.read() + ' '.join(sys.argv[1:]))\n"
        "sys.exit(4)\n",
        stdin="from stdin;",
        args=["a", "b"],
        files={"in/data.txt": "from file;"},
        policy="strict",
        limits={"wall_time_s": 2.0},
        fetch_files=["out.txt"],
    )
    assert result.status is ExecStatus.NONZERO_EXIT
    assert result.exit_code == 4
    assert result.file("out.txt") == b"from file;from stdin;a b"


def test_bash_and_binary_output(client: SandboxClient) -> None:
    result = client.run("printf 'a\\377b'", language="bash")
    assert result.stdout_bytes() == b"a\xffb"


def test_pool_and_health(client: SandboxClient) -> None:
    status = client.pool()
    assert isinstance(status, PoolStatus)
    assert "default" in {g.policy for g in status.groups}
    health = client.health()
    assert health["status"] == "ok"
    assert "default" in health["policies"]


@pytest.mark.parametrize(
    ("kwargs", "kind", "builtin", "needle"),
    [
        ({"limits": {"wall_time_s": 100.0}}, LimitError, ValueError, "wall_time_s"),
        ({"limits": {"memory_mb": 4096}}, LimitError, ValueError, "memory_mb"),
        ({"language": "cobol"}, InvalidRequestError, ValueError, "cobol"),
        ({"env": {"NOT_ALLOWED": "1"}}, InvalidRequestError, ValueError, "NOT_ALLOWED"),
        ({"files": {"../escape": "x"}}, InvalidRequestError, ValueError, "escape"),
        ({"limits": {"wall_time_s": -1}}, InvalidRequestError, ValueError, "wall_time_s"),
        ({"policy": "missing-policy"}, NotFoundError, LookupError, "missing-policy"),
    ],
)
def test_errors_map_to_exception_types(
    client: SandboxClient,
    kwargs: dict[str, Any],
    kind: type[SandboxError],
    builtin: type[Exception],
    needle: str,
) -> None:
    with pytest.raises(kind) as caught:
        client.run("print(1)", **kwargs)
    assert type(caught.value) is kind
    assert isinstance(caught.value, builtin)
    assert needle in str(caught.value)


def test_user_code_failure_is_not_an_exception(client: SandboxClient) -> None:
    result = client.run("while True: pass", limits={"wall_time_s": 0.5})
    assert result.status is ExecStatus.TIMEOUT


def test_unreachable_service() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with SandboxClient(url, timeout=5) as c:
        with pytest.raises(ServiceUnreachableError) as caught:
            c.run("print(1)")
        assert isinstance(caught.value, ConnectionError)
        assert url in str(caught.value)
        with pytest.raises(ServiceUnreachableError):
            c.pool()
        with pytest.raises(ServiceUnreachableError):
            c.health()


def test_client_timeout_is_a_sandbox_timeout(service: Service) -> None:
    with SandboxClient(service.url, timeout=0.5) as c:
        with pytest.raises(SandboxTimeoutError) as caught:
            c.run("import time; time.sleep(2)")
        assert isinstance(caught.value, TimeoutError)


# --------------------------------------------------------------------------- async


async def test_async_run_pool_health(service: Service) -> None:
    async with AsyncSandboxClient(service.url, timeout=60) as c:
        result = await c.run("import sys; print(sys.stdin.read()[::-1])", stdin="abc")
        assert result.status is ExecStatus.OK
        assert result.stdout == "cba\n"
        status = await c.pool()
        assert "default" in {g.policy for g in status.groups}
        health = await c.health()
        assert health["status"] == "ok"


async def test_async_errors(service: Service) -> None:
    async with AsyncSandboxClient(service.url, timeout=60) as c:
        with pytest.raises(LimitError):
            await c.run("print(1)", limits={"wall_time_s": 100.0})
        with pytest.raises(InvalidRequestError):
            await c.run("print(1)", language="cobol")
        with pytest.raises(NotFoundError):
            await c.run("print(1)", policy="missing-policy")


async def test_async_concurrent_runs(service: Service) -> None:
    import asyncio

    async with AsyncSandboxClient(service.url, timeout=60) as c:
        results = await asyncio.gather(*(c.run(f"print({i} * 2)") for i in range(12)))
    assert [r.stdout for r in results] == [f"{i * 2}\n" for i in range(12)]


async def test_async_unreachable_service() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with AsyncSandboxClient(url, timeout=5) as c:
        with pytest.raises(ServiceUnreachableError):
            await c.run("print(1)")
        with pytest.raises(ServiceUnreachableError):
            await c.pool()


# --------------------------------------------------------------------------- 429 and retries


@pytest.fixture(scope="module")
def saturated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One container, no waiting: a second concurrent request gets 429."""
    with one_container_service(tmp_path_factory.mktemp("client-one-container")) as svc:
        yield svc


def python_group(client: httpx.Client) -> dict[str, Any]:
    """The saturated service's default group on the python image."""
    groups = client.get("/v1/pool").json()["groups"]
    (group,) = [g for g in groups if g["image"].startswith("sandbox-python:")]
    assert isinstance(group, dict)
    return group


class Holder:
    """Keeps the saturated service's only sandbox busy for HOLD_S seconds."""

    def __init__(self, svc: Service) -> None:
        self.svc = svc
        self.response: httpx.Response | None = None
        self.thread = threading.Thread(target=self._hold)

    def _hold(self) -> None:
        with httpx.Client(base_url=self.svc.url, timeout=60) as c:
            self.response = c.post("/v1/run", json={"code": HOLD_CODE})

    def __enter__(self) -> Holder:
        with httpx.Client(base_url=self.svc.url, timeout=10) as c:
            deadline = time.monotonic() + 10
            while python_group(c)["idle"] != 1:
                assert time.monotonic() < deadline, "the only sandbox never became idle"
                time.sleep(0.02)
            self.thread.start()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if python_group(c)["busy"] == 1:
                    return self
                time.sleep(0.02)
        raise AssertionError("the holding request never became busy")

    def __exit__(self, *_: object) -> None:
        self.thread.join(30)
        assert self.response is not None and self.response.status_code == 200


def test_429_without_retries_raises_capacity_error(saturated: Service) -> None:
    with Holder(saturated), SandboxClient(saturated.url, max_retries=0) as c:
        started = time.monotonic()
        with pytest.raises(CapacityError) as caught:
            c.run("print(1)")
        assert time.monotonic() - started < 1.0, "no retry may happen with max_retries=0"
        assert caught.value.retry_after >= 1
        assert "busy" in str(caught.value)


def test_429_retries_exhausted_raise_capacity_error(saturated: Service) -> None:
    with Holder(saturated), SandboxClient(saturated.url, max_retries=1) as c:
        started = time.monotonic()
        with pytest.raises(CapacityError):
            c.run("print(1)")
        elapsed = time.monotonic() - started
        assert 0.9 <= elapsed < HOLD_S, "one retry after Retry-After (1 s), then give up"


def test_429_is_retried_until_it_succeeds(saturated: Service) -> None:
    with Holder(saturated), SandboxClient(saturated.url, max_retries=10) as c:
        started = time.monotonic()
        result = c.run("print('after retries')")
        elapsed = time.monotonic() - started
    assert result.stdout == "after retries\n"
    assert elapsed >= 1.0, "the first attempt was refused, so at least one Retry-After wait"


async def test_async_429_retry_and_exhaustion(saturated: Service) -> None:
    with Holder(saturated):
        async with AsyncSandboxClient(saturated.url, max_retries=0) as c:
            with pytest.raises(CapacityError):
                await c.run("print(1)")
        async with AsyncSandboxClient(saturated.url, max_retries=10) as c:
            result = await c.run("print('async after retries')")
    assert result.stdout == "async after retries\n"


def test_folder_archive_is_the_same_for_the_same_files(tmp_path: Path) -> None:
    """A build context's bytes depend on the files alone (not on times or owners), so a
    service can cache by them; contents, nesting and exec bits survive."""
    tree = tmp_path / "ctx"
    (tree / "sub").mkdir(parents=True)
    (tree / "Dockerfile").write_text("FROM sandbox-python\n")
    (tree / "sub" / "run.sh").write_text("echo hi\n")
    (tree / "sub" / "run.sh").chmod(0o755)
    first = folder_archive(tree)
    os.utime(tree / "Dockerfile", (1, 1))
    time.sleep(0.01)
    (tree / "sub" / "run.sh").write_text("echo hi\n")  # rewritten: a new mtime
    assert folder_archive(tree) == first
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == ["Dockerfile", "sub", "sub/run.sh"]
        assert members["sub/run.sh"].mode & 0o111
        script = tar.extractfile("sub/run.sh")
        assert script is not None and script.read() == b"echo hi\n"
    (tree / "Dockerfile").write_text("FROM sandbox-polyglot\n")
    assert folder_archive(tree) != first
    with pytest.raises(ValueError, match="not a folder"):
        folder_archive(tree / "Dockerfile")
