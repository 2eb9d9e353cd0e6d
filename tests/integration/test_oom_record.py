"""The kernel's OOM record of a gVisor container's memory cgroup (sandbox/backends/oom.py).

Real runsc containers with ``auto_remove``, as the backend creates them: the record
is read only after the container is gone, cgroup and all, which is when Docker's
own ``oom`` event is sometimes lost.
"""

from __future__ import annotations

import os
import time

import docker
import docker.errors
import pytest

from sandbox.backends.oom import CGROUP_V1_MEMORY, memory_cgroup_of, watch_oom

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(
        not os.path.isdir(CGROUP_V1_MEMORY),
        reason="cgroup v2 host: no record is kept (Docker's oom event is the evidence)",
    ),
]

MiB = 1 << 20
# A moment's pause first, so that the record is taken before the container dies.
PAUSE = "import time\ntime.sleep(0.5)\n"
BOMB = PAUSE + "chunks = []\nwhile True:\n    chunks.append(b'x' * (10 << 20))\n"
QUIET = PAUSE + "chunks = [b'x' * (8 << 20)]\n"


def _start(client: docker.DockerClient, image: str, code: str) -> tuple[str, int]:
    host = client.api.create_host_config(
        mem_limit=128 * MiB,
        memswap_limit=128 * MiB,
        runtime="runsc",
        auto_remove=True,
        init=True,
    )
    created = client.api.create_container(
        image, ["python3", "-c", code], host_config=host, user="0:0", labels={"test": "oom"}
    )
    client.api.start(created["Id"])
    return created["Id"], int(client.api.inspect_container(created["Id"])["State"]["Pid"])


def _wait_removed(client: docker.DockerClient, container_id: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            client.api.inspect_container(container_id)
        except docker.errors.NotFound:
            return
        time.sleep(0.05)
    raise AssertionError(f"container {container_id[:12]} still there after 30 s")


@pytest.mark.parametrize(("code", "oom"), [(BOMB, True), (QUIET, False)], ids=["bomb", "quiet"])
async def test_the_record_tells_an_oom_kill_after_the_container_is_gone(
    docker_client: docker.DockerClient, python_image: str, code: str, oom: bool
) -> None:
    for _ in range(3):  # Docker's event was missed about once in ten such runs
        container_id, pid = _start(docker_client, python_image, code)
        directory = memory_cgroup_of(pid)
        record = watch_oom(pid)
        assert record is not None and directory is not None
        assert container_id in directory  # .../docker/ID or .../docker-ID.scope
        try:
            _wait_removed(docker_client, container_id)
            assert await record.oom_killed() is oom
        finally:
            record.close()


def test_no_record_for_a_process_that_is_not_there() -> None:
    assert watch_oom(2**22 + 1) is None  # above pid_max: no such process
