"""The runner's channel on real containers: its own socket under runc, the attach stream
under gVisor and wherever the socket is out of reach, and one connection at a time."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import docker
import pytest

from sandbox.backends.channel import RunnerChannel
from sandbox.backends.docker import RUNNER_SOCKET, DockerBackend, DockerSandbox, container_settings
from sandbox.core.execution import BASE_ENV, exec_limits
from sandbox.policy import Policy
from sandbox.results import ExecStatus
from tests.conftest import make_policy

pytestmark = pytest.mark.docker


async def echo(sandbox: DockerSandbox, policy: Policy, text: str) -> bytes:
    result = await sandbox.exec(
        ["sh", "-c", f"echo {text}"], limits=exec_limits(policy, None), env=BASE_ENV
    )
    assert result.status == ExecStatus.OK, result
    return result.stdout


@pytest.fixture
async def runc_sandbox(
    backend: DockerBackend, python_image: str
) -> AsyncIterator[tuple[DockerSandbox, Policy]]:
    policy = make_policy("channel-runc")
    sandbox = await backend.create(python_image, policy)
    try:
        yield sandbox, policy
    finally:
        await sandbox.close()


async def test_runc_requests_go_over_the_runners_socket(
    runc_sandbox: tuple[DockerSandbox, Policy],
) -> None:
    sandbox, policy = runc_sandbox
    assert sandbox.transport == "socket"
    for n in range(20):
        assert await echo(sandbox, policy, f"step-{n}") == f"step-{n}\n".encode()
    assert await sandbox.ping()


async def test_runsc_stays_on_the_attach_stream(backend: DockerBackend, python_image: str) -> None:
    policy = make_policy("channel-runsc", runtime="runsc")
    sandbox = await backend.create(python_image, policy)
    try:
        assert sandbox.transport == "attach"
        assert await echo(sandbox, policy, "gvisor") == b"gvisor\n"
    finally:
        await sandbox.close()


async def test_a_second_connection_to_the_runner_is_closed_unanswered(
    runc_sandbox: tuple[DockerSandbox, Policy], docker_client: docker.DockerClient
) -> None:
    """Only root in the container can connect at all; even then the service's connection
    is the only one the runner serves."""
    sandbox, policy = runc_sandbox
    intruder = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.connect({RUNNER_SOCKET!r})\n"
        'body = b\'{"op": "hello", "id": 1}\'\n'
        "s.settimeout(10)\n"
        "try:\n"
        "    s.sendall(len(body).to_bytes(4, 'big') + body)\n"
        "    print('answered' if s.recv(4096) else 'closed')\n"
        "except (ConnectionResetError, BrokenPipeError):\n"
        "    print('closed')\n"
    )
    container = docker_client.containers.get(sandbox.id)
    code, output = container.exec_run(["python3", "-c", intruder], user="0:0")
    assert (code, output) == (0, b"closed\n")
    assert await echo(sandbox, policy, "still-mine") == b"still-mine\n"


async def test_an_unreachable_socket_leaves_the_channel_on_the_attach_stream(
    backend: DockerBackend, python_image: str, docker_client: docker.DockerClient
) -> None:
    """Where the service cannot reach the runner's socket (in a container of its own, say),
    requests keep going through the attach stream; moving later still works."""
    policy = make_policy("channel-fallback")
    settings = container_settings(python_image, policy, backend.owner)
    host_config = docker_client.api.create_host_config(**settings.pop("host_config"))
    container_id = docker_client.api.create_container(**settings, host_config=host_config)["Id"]
    channel = await RunnerChannel.attach(backend.socket_path, backend.api_version, container_id)
    try:
        await backend.start_container(container_id)
        hello = await channel.call({"op": "hello"}, 30)
        assert hello["socket"] == RUNNER_SOCKET
        assert not await channel.use_socket("/nonexistent/channel.sock")
        assert channel.transport == "attach"
        assert (await channel.call({"op": "ping"}, 30))["ok"]
        pid = await backend.container_pid(container_id)
        assert await channel.use_socket(f"/proc/{pid}/root{RUNNER_SOCKET}")
        assert channel.transport == "socket"
        reply = await channel.call({"op": "ping"}, 30)
        assert reply["ok"] and reply["pid"] == hello["pid"]
        assert json.dumps(reply)  # an ordinary reply, whichever way it came
    finally:
        await channel.close()
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.api.remove_container(container_id, force=True)
