"""The warm pool against real containers: warming, tenant binding, reset, recycling, capacity.

Each test uses a policy of its own (a distinct name and content, so a group of
its own in the pool) and identifies containers by their Docker id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import docker
import docker.errors
import psutil
import pytest

from sandbox.backends.docker import LABEL_OWNER, LABEL_POLICY, DockerBackend
from sandbox.core.execution import BASE_ENV, ExecutionService, RunRequest, exec_limits
from sandbox.core.pool import GroupStatus, Pool
from sandbox.errors import (
    CapacityError,
    ContainerLostError,
    InfrastructureError,
    status_and_code,
)
from sandbox.policy import Policy
from sandbox.results import ExecResult, ExecStatus
from tests.conftest import make_policy

pytestmark = pytest.mark.docker

CGROUP_ID = (
    "import re\n"
    "text = open('/proc/self/cgroup').read()\n"
    "print(re.search(r'/docker/([0-9a-f]{64})', text).group(1), flush=True)\n"
)


def policy_for(name: str, *, warm: int = 0, max_: int = 1, **pool: int) -> Policy:
    # Pool groups are keyed by the policy's content: the tag keeps each test's group apart.
    return make_policy(
        name,
        resources={"wall_time_s": 2.0, "cpu_time_s": 2.0, "memory_mb": 256},
        env={"set": {"TEST_POOL_GROUP": name}},
        pool={"warm": warm, "max": max_, **pool},
    )


def group(pool: Pool, policy: Policy) -> GroupStatus:
    (found,) = [g for g in pool.status().groups if g.policy == policy.name]
    return found


async def settle(pool: Pool, policy: Policy, timeout: float = 20.0) -> GroupStatus:
    """Wait until the group has no container starting or resetting."""
    deadline = time.monotonic() + timeout
    while True:
        status = group(pool, policy)
        if status.starting == 0 and status.resetting == 0:
            return status
        assert time.monotonic() < deadline, f"group never settled: {status}"
        await asyncio.sleep(0.02)


def containers_of(
    client: docker.DockerClient, owner: str, policy: Policy | None = None
) -> list[str]:
    labels = [f"{LABEL_OWNER}={owner}"]
    if policy is not None:
        labels.append(f"{LABEL_POLICY}={policy.name}")
    found = client.api.containers(all=True, filters={"label": labels})
    return sorted(c["Id"] for c in found if c["State"] in ("created", "running", "restarting"))


async def wait_gone(client: docker.DockerClient, container_id: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = client.api.inspect_container(container_id)
        except docker.errors.NotFound:
            return
        if not info["State"]["Running"]:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"container {container_id[:12]} still running")


async def exec_py(pool: Pool, image: str, policy: Policy, tenant: str, code: str) -> ExecResult:
    async with pool.lease(image, policy, tenant) as lease:
        return await lease.sandbox.exec(
            ["python3", "main.py"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            files={"main.py": code.encode()},
        )


@contextlib.asynccontextmanager
async def lease_id(pool: Pool, image: str, policy: Policy, tenant: str) -> AsyncIterator[str]:
    async with pool.lease(image, policy, tenant) as lease:
        yield lease.sandbox.id


@pytest.fixture
async def isolated_backend() -> AsyncIterator[DockerBackend]:
    """A backend whose containers carry an owner label of their own.

    ``DockerBackend.close()`` removes every container labelled with its owner,
    and every backend of one process gets the same owner label; the pools made
    here are closed by their tests, which must not destroy the session pool's
    containers. A helper process lends its identity (pid and start time), so
    that the label stays "alive" for the orphan reaper of any other service.
    """
    holder = subprocess.Popen(["sleep", "600"])
    try:
        backend = DockerBackend()
        started = psutil.Process(holder.pid).create_time()
        backend.owner = f"{socket.gethostname()}:{holder.pid}:{started:.3f}"
        yield backend
        await backend.close()
    finally:
        holder.kill()
        holder.wait()


# --------------------------------------------------------------------------------------
# Warming and tenant binding
# --------------------------------------------------------------------------------------


async def test_warm_size_is_reached(
    pool: Pool, python_image: str, docker_client: docker.DockerClient, backend: DockerBackend
) -> None:
    policy = policy_for("pool-warm", warm=2, max_=3)
    await pool.warm(python_image, policy, wait=True)
    status = await settle(pool, policy)
    assert status.idle == 2
    assert status.idle_bound == 0
    assert status.busy == 0
    assert status.warm_target == 2
    assert status.created_total == 2
    assert len(containers_of(docker_client, backend.owner, policy)) == 2

    # Taking one warm container makes the pool warm another, up to max.
    async with pool.lease(python_image, policy, "tenant-a"):
        await asyncio.sleep(0)
        deadline = time.monotonic() + 20
        while group(pool, policy).created_total < 3:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        status = await settle(pool, policy)
        assert status.busy == 1
        assert status.idle == 2
        assert len(containers_of(docker_client, backend.owner, policy)) == 3


async def test_container_serves_only_its_first_tenant(pool: Pool, python_image: str) -> None:
    policy = policy_for("pool-binding", max_=3)
    async with lease_id(pool, python_image, policy, "alice") as alice_id:
        pass
    await settle(pool, policy)
    # An idle container bound to alice exists, and there is spare capacity: bob gets another.
    assert group(pool, policy).idle_bound == 1
    async with lease_id(pool, python_image, policy, "bob") as bob_id:
        assert bob_id != alice_id
    await settle(pool, policy)
    async with lease_id(pool, python_image, policy, "alice") as again:
        assert again == alice_id
    await settle(pool, policy)
    async with lease_id(pool, python_image, policy, "bob") as again:
        assert again == bob_id
    await settle(pool, policy)
    # A third tenant never gets either of them.
    async with lease_id(pool, python_image, policy, "carol") as carol_id:
        assert carol_id not in (alice_id, bob_id)


async def test_at_max_the_other_tenants_container_is_evicted_not_reused(
    pool: Pool, python_image: str, docker_client: docker.DockerClient
) -> None:
    policy = policy_for("pool-evict", max_=1)
    async with lease_id(pool, python_image, policy, "alice") as alice_id:
        pass
    before = await settle(pool, policy)
    assert before.idle_bound == 1
    async with lease_id(pool, python_image, policy, "bob") as bob_id:
        assert bob_id != alice_id
        status = group(pool, policy)
        assert status.retired_total == before.retired_total + 1
        assert status.busy == 1
        assert status.idle == 0
    await wait_gone(docker_client, alice_id)
    await settle(pool, policy)
    # And back: alice does not get bob's container either.
    async with lease_id(pool, python_image, policy, "alice") as alice_again:
        assert alice_again not in (alice_id, bob_id)
    await wait_gone(docker_client, bob_id)


# --------------------------------------------------------------------------------------
# Reset between two executions of one tenant
# --------------------------------------------------------------------------------------

LIST_LEFTOVERS = (
    "import os, json\n"
    "report = {d: sorted(os.listdir(d)) for d in ('/workspace', '/tmp', '/dev/shm')}\n"
    "report['workspace_mode'] = oct(os.stat('/workspace').st_mode & 0o7777)\n"
    "report['tmp_mode'] = oct(os.stat('/tmp').st_mode & 0o7777)\n"
    "me = os.getpid()\n"
    "procs = []\n"
    "for pid in os.listdir('/proc'):\n"
    "    if not pid.isdigit() or int(pid) == me:\n"
    "        continue\n"
    "    try:\n"
    "        status = open(f'/proc/{pid}/status').read()\n"
    "    except OSError:\n"
    "        continue\n"
    "    uid = [l.split()[1] for l in status.splitlines() if l.startswith('Uid:')][0]\n"
    "    if uid == str(os.getuid()):\n"
    "        procs.append(open(f'/proc/{pid}/cmdline', 'rb').read().decode(errors='replace'))\n"
    "report['processes'] = procs\n"
    "report['sysvipc'] = {t: open(f'/proc/sysvipc/{t}').read().splitlines()[1:]\n"
    "                     for t in ('shm', 'sem', 'msg')}\n"
    "print(json.dumps(report))\n"
)

CLEAN = {
    "/workspace": ["main.py"],
    "/tmp": [],
    "/dev/shm": [],
    "workspace_mode": "0o755",
    "tmp_mode": "0o1777",
    "processes": [],
    "sysvipc": {"shm": [], "sem": [], "msg": []},
}


async def leftovers(
    pool: Pool, image: str, policy: Policy, tenant: str
) -> tuple[str, dict[str, Any]]:
    async with pool.lease(image, policy, tenant) as lease:
        result = await lease.sandbox.exec(
            ["python3", "main.py"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            files={"main.py": LIST_LEFTOVERS.encode()},
        )
        assert result.status == ExecStatus.OK, result.stderr
        return lease.sandbox.id, json.loads(result.stdout)


async def test_files_are_gone_for_the_next_execution(pool: Pool, python_image: str) -> None:
    policy = policy_for("pool-files")
    plant = (
        "import os, multiprocessing.shared_memory as sm\n"
        "open('/workspace/a.txt', 'w').write('a')\n"
        "open('/workspace/.hidden', 'w').write('h')\n"
        "os.makedirs('/workspace/sub/deeper')\n"
        "open('/workspace/sub/deeper/b', 'w').write('b')\n"
        "os.chmod('/workspace/sub', 0)\n"
        "open('/tmp/c.txt', 'w').write('c')\n"
        "os.mkfifo('/tmp/fifo')\n"
        "os.symlink('/etc/passwd', '/tmp/link')\n"
        "open('/dev/shm/d', 'w').write('d')\n"
        "seg = sm.SharedMemory(name='planted', create=True, size=4096)\n"
        "seg.buf[:4] = b'left'\n"
        "seg.close()\n"
        "os.chmod('/workspace', 0o700)\n"
        "print(sorted(os.listdir('/dev/shm')))\n"
    )
    async with pool.lease(python_image, policy, "tenant") as lease:
        first_id = lease.sandbox.id
        planted = await lease.sandbox.exec(
            ["python3", "/workspace/main.py"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            files={"main.py": plant.encode()},
        )
        assert planted.status == ExecStatus.OK, planted.stderr
        assert planted.stdout == b"['d', 'planted']\n"
    await settle(pool, policy)
    second_id, report = await leftovers(pool, python_image, policy, "tenant")
    assert second_id == first_id  # the same container, reset
    assert report == CLEAN


BACKGROUND = {
    "nohup": ["bash", "-c", "nohup sleep 100 >/dev/null 2>&1 &\necho started"],
    "double_fork_daemon": [
        "python3",
        "-c",
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.closerange(0, 3)\n"
        "        time.sleep(100)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "print('started')\n",
    ],
    "ignores_sigterm": [
        "python3",
        "-c",
        "import os, signal, time\n"
        "if os.fork() == 0:\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "    time.sleep(100)\n"
        "    os._exit(0)\n"
        "print('started')\n",
    ],
}


@pytest.mark.parametrize("keep_processes", [False, True], ids=["exec", "reset"])
@pytest.mark.parametrize("kind", sorted(BACKGROUND))
async def test_background_processes_are_gone(
    pool: Pool, python_image: str, kind: str, keep_processes: bool
) -> None:
    """Without keep_processes the execution itself kills them; with it, the reset must."""
    policy = policy_for(f"pool-bg-{kind}-{keep_processes}".replace("_", "-"))
    async with pool.lease(python_image, policy, "tenant") as lease:
        first_id = lease.sandbox.id
        result = await lease.sandbox.exec(
            BACKGROUND[kind],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            keep_processes=keep_processes,
        )
        assert result.status == ExecStatus.OK, result.stderr
        assert result.stdout == b"started\n"
        # Still there before the reset only when the execution was told to keep them.
        probe = await lease.sandbox.exec(
            ["python3", "main.py"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            files={"main.py": LIST_LEFTOVERS.encode()},
            keep_processes=True,
        )
        alive = json.loads(probe.stdout)["processes"]
        assert len(alive) == (1 if keep_processes else 0), alive
    await settle(pool, policy)
    second_id, report = await leftovers(pool, python_image, policy, "tenant")
    assert second_id == first_id
    assert report["processes"] == []


async def test_system_v_ipc_objects_are_gone(pool: Pool, python_image: str) -> None:
    policy = policy_for("pool-sysv")
    plant = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "IPC_CREAT = 0o1000\n"
        "ids = [libc.shmget(0x5EED, 1 << 20, IPC_CREAT | 0o600),\n"
        "       libc.shmget(0, 4096, IPC_CREAT | 0o600),\n"
        "       libc.semget(0x5EEE, 3, IPC_CREAT | 0o600),\n"
        "       libc.msgget(0x5EEF, IPC_CREAT | 0o600)]\n"
        "print(all(i >= 0 for i in ids))\n"
    )
    async with pool.lease(python_image, policy, "tenant") as lease:
        first_id = lease.sandbox.id
        result = await lease.sandbox.exec(
            ["python3", "main.py"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            files={"main.py": plant.encode()},
        )
        assert result.stdout == b"True\n", result.stderr
    await settle(pool, policy)
    second_id, report = await leftovers(pool, python_image, policy, "tenant")
    assert second_id == first_id
    assert report["sysvipc"] == {"shm": [], "sem": [], "msg": []}


async def test_system_v_segment_given_to_another_uid_is_gone(pool: Pool, python_image: str) -> None:
    policy = policy_for("pool-sysv-chown")
    plant = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "class Perm(ctypes.Structure):\n"
        "    _fields_ = [('key', ctypes.c_int), ('uid', ctypes.c_uint), ('gid', ctypes.c_uint),\n"
        "                ('cuid', ctypes.c_uint), ('cgid', ctypes.c_uint),\n"
        "                ('mode', ctypes.c_ushort), ('pad', ctypes.c_ushort * 3),\n"
        "                ('unused', ctypes.c_ulong * 2)]\n"
        "class Ds(ctypes.Structure):\n"
        "    _fields_ = [('perm', Perm), ('rest', ctypes.c_byte * 128)]\n"
        "shmid = libc.shmget(0x5EED, 4096, 0o1000 | 0o600)\n"
        "libc.shmat.restype = ctypes.c_void_p\n"
        "addr = libc.shmat(shmid, None, 0)\n"
        "ctypes.memmove(addr, b'persisted secret', 16)\n"
        "ds = Ds()\n"
        "assert libc.shmctl(shmid, 2, ctypes.byref(ds)) == 0  # IPC_STAT\n"
        "ds.perm.uid = ds.perm.gid = 65534\n"
        "assert libc.shmctl(shmid, 1, ctypes.byref(ds)) == 0  # IPC_SET\n"
        "print('planted')\n"
    )
    read_back = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.shmat.restype = ctypes.c_void_p\n"
        "shmid = libc.shmget(0x5EED, 0, 0)\n"
        "print(shmid >= 0 and ctypes.string_at(libc.shmat(shmid, None, 0), 16))\n"
    )
    async with pool.lease(python_image, policy, "tenant") as lease:
        first_id = lease.sandbox.id
        result = await lease.sandbox.exec(
            ["python3", "main.py"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            files={"main.py": plant.encode()},
        )
        assert result.stdout == b"planted\n", result.stderr
    await settle(pool, policy)
    async with pool.lease(python_image, policy, "tenant") as lease:
        later = await lease.sandbox.exec(
            ["python3", "main.py"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            files={"main.py": read_back.encode()},
        )
        if lease.sandbox.id == first_id:  # the container was reused: the reset must have worked
            assert later.stdout == b"False\n", later.stdout
    second_id, report = await leftovers(pool, python_image, policy, "tenant")
    assert second_id == first_id
    assert report["sysvipc"]["shm"] == []


async def test_service_path_resets_after_each_run(pool: Pool, python_image: str) -> None:
    """ExecutionService uses exec-then-reset in one request: the same checks on that path."""
    policy = policy_for("pool-service-reset")
    service = ExecutionService(pool, {"p": policy}, lambda _: python_image)
    plant = CGROUP_ID + (
        "import os, subprocess, ctypes\n"
        "open('/workspace/left.txt', 'w').write('x')\n"
        "open('/tmp/left.txt', 'w').write('x')\n"
        "open('/dev/shm/left', 'w').write('x')\n"
        "ctypes.CDLL(None).shmget(0x5EED, 4096, 0o1000 | 0o600)\n"
        "subprocess.Popen(['bash', '-c', 'trap \"\" TERM; sleep 100'], start_new_session=True)\n"
    )
    first = await service.run(RunRequest(code=plant, policy="p"), tenant="t")
    assert first.status == ExecStatus.OK, first.stderr
    await settle(pool, policy)
    check = CGROUP_ID + LIST_LEFTOVERS
    second = await service.run(RunRequest(code=check, policy="p"), tenant="t")
    assert second.status == ExecStatus.OK, second.stderr
    container, report = second.stdout.split(b"\n", 1)
    assert container == first.stdout.split()[0]  # the same container, reset
    assert json.loads(report) == CLEAN


async def test_health_check_retires_a_dead_idle_container(
    pool: Pool, python_image: str, docker_client: docker.DockerClient
) -> None:
    policy = policy_for("pool-health")
    async with pool.lease(python_image, policy, "t") as lease:
        victim = lease.sandbox.id
    await settle(pool, policy)
    await asyncio.to_thread(docker_client.api.kill, victim)
    deadline = time.monotonic() + pool.health_interval_s * 3 + 5
    while group(pool, policy).retired_total < 1:
        assert time.monotonic() < deadline, "the health loop never retired the dead container"
        await asyncio.sleep(0.1)
    assert group(pool, policy).idle == 0
    result = await exec_py(pool, python_image, policy, "t", CGROUP_ID)
    assert result.status == ExecStatus.OK
    assert result.stdout.split()[0].decode() != victim


async def test_a_failed_reset_retires_the_container(
    pool: Pool, python_image: str, docker_client: docker.DockerClient
) -> None:
    """The container dies between the execution and its reset: the reset fails, it is retired."""
    policy = policy_for("pool-bad-reset")
    async with pool.lease(python_image, policy, "tenant") as lease:
        result = await lease.sandbox.exec(
            ["python3", "main.py"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            files={"main.py": CGROUP_ID.encode()},
        )
        first_id = result.stdout.split()[0].decode()
        await asyncio.to_thread(docker_client.api.kill, first_id)
    status = await settle(pool, policy)
    assert status.retired_total == 1
    assert status.idle == 0
    await wait_gone(docker_client, first_id)
    again = await exec_py(pool, python_image, policy, "tenant", CGROUP_ID)
    assert again.status == ExecStatus.OK
    assert again.stdout.split()[0].decode() != first_id


async def test_a_deep_directory_tree_is_wiped(pool: Pool, python_image: str) -> None:
    """Nesting deeper than any descriptor budget or recursion limit is still wiped."""
    policy = policy_for("pool-deep-tree")
    deep = "import os\nfor _ in range(2000):\n    os.mkdir('d')\n    os.chdir('d')\nprint('ok')\n"
    result = await exec_py(pool, python_image, policy, "tenant", CGROUP_ID + deep)
    assert result.status == ExecStatus.OK, result.stderr
    first_id = result.stdout.split()[0].decode()
    status = await settle(pool, policy)
    assert status.retired_total == 0
    again = await exec_py(pool, python_image, policy, "tenant", CGROUP_ID + LIST_LEFTOVERS)
    container, report = again.stdout.split(b"\n", 1)
    assert container.decode() == first_id
    assert json.loads(report) == CLEAN


async def test_max_uses_retires(pool: Pool, python_image: str) -> None:
    policy = policy_for("pool-max-uses", max_uses=2)
    ids = []
    for _ in range(3):
        async with lease_id(pool, python_image, policy, "tenant") as container_id:
            ids.append(container_id)
        await settle(pool, policy)
    assert ids[0] == ids[1]
    assert ids[2] != ids[0]
    assert group(pool, policy).retired_total == 1


# --------------------------------------------------------------------------------------
# Anomalies: timeouts and containers killed from outside
# --------------------------------------------------------------------------------------


async def test_a_timeout_kill_retires_the_container(
    pool: Pool, python_image: str, docker_client: docker.DockerClient
) -> None:
    policy = policy_for("pool-timeout")
    service = ExecutionService(pool, {"p": policy}, lambda _: python_image)
    first = await service.run(
        RunRequest(code=CGROUP_ID + "import time\ntime.sleep(60)\n", policy="p"), tenant="t"
    )
    assert first.status == ExecStatus.TIMEOUT
    assert first.reason == "wall_time"
    first_id = first.stdout.split()[0].decode()
    second = await service.run(RunRequest(code=CGROUP_ID, policy="p"), tenant="t")
    assert second.status == ExecStatus.OK
    assert second.stdout.split()[0].decode() != first_id
    assert group(pool, policy).retired_total == 1
    await wait_gone(docker_client, first_id)
    # A clean run is not retired.
    await settle(pool, policy)
    third = await service.run(RunRequest(code=CGROUP_ID, policy="p"), tenant="t")
    assert third.stdout == second.stdout


async def test_container_killed_from_outside_gives_infra_error_and_is_replaced(
    pool: Pool, python_image: str, docker_client: docker.DockerClient, backend: DockerBackend
) -> None:
    policy = policy_for("pool-killed", warm=1)
    service = ExecutionService(pool, {"p": policy}, lambda _: python_image)
    await pool.warm(python_image, policy, wait=True)
    (victim,) = containers_of(docker_client, backend.owner, policy)
    running = asyncio.create_task(
        service.run(RunRequest(code="import time\ntime.sleep(5)\n", policy="p"), tenant="t")
    )
    deadline = time.monotonic() + 10
    while group(pool, policy).busy != 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)  # the program is running
    started = time.monotonic()
    await asyncio.to_thread(docker_client.api.kill, victim)
    result = await running
    assert time.monotonic() - started < 3  # reported at once, not after the timeout
    assert result.status == ExecStatus.INFRA_ERROR
    assert result.error and "gone" in result.error
    assert result.exit_code is None
    # The pool replaced it: the next run works, in another container.
    after = await service.run(RunRequest(code=CGROUP_ID, policy="p"), tenant="t")
    assert after.status == ExecStatus.OK, after.error
    assert after.stdout.split()[0].decode() != victim
    assert group(pool, policy).retired_total >= 1
    await wait_gone(docker_client, victim)


async def test_idle_container_killed_from_outside_is_not_handed_out(
    pool: Pool, python_image: str, docker_client: docker.DockerClient
) -> None:
    policy = policy_for("pool-killed-idle")
    async with pool.lease(python_image, policy, "t") as lease:
        victim = lease.sandbox
    await settle(pool, policy)
    await asyncio.to_thread(docker_client.api.kill, victim.id)
    deadline = time.monotonic() + 5
    while victim.alive:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    result = await exec_py(pool, python_image, policy, "t", "print('fine')")
    assert result.stdout == b"fine\n"


# --------------------------------------------------------------------------------------
# Capacity, status and shutdown (pools of their own)
# --------------------------------------------------------------------------------------


async def test_saturation_without_waiters_raises_capacity_error(
    isolated_backend: DockerBackend, python_image: str
) -> None:
    pool = Pool(isolated_backend, max_waiters=0)
    policy = policy_for("pool-saturated")
    try:
        async with pool.lease(python_image, policy, "a"):
            started = time.monotonic()
            with pytest.raises(CapacityError) as info:
                async with pool.lease(python_image, policy, "a"):
                    pass
            assert time.monotonic() - started < 0.5  # refused at once, no wait
            assert info.value.retry_after > 0
            assert "busy" in str(info.value)
            # Another tenant is refused too: the only container is not shared.
            with pytest.raises(CapacityError):
                async with pool.lease(python_image, policy, "b"):
                    pass
            status = group(pool, policy)
            assert status.busy == 1 and status.waiting == 0
    finally:
        await pool.close()


async def test_lease_timeout_raises_capacity_error_and_waiters_are_served(
    isolated_backend: DockerBackend, python_image: str
) -> None:
    pool = Pool(isolated_backend, lease_timeout_s=0.6)
    policy = policy_for("pool-lease-timeout")
    try:
        async with pool.lease(python_image, policy, "a") as held:
            started = time.monotonic()
            with pytest.raises(CapacityError) as info:
                async with pool.lease(python_image, policy, "a"):
                    pass
            waited = time.monotonic() - started
            assert 0.5 <= waited < 3.0
            assert info.value.retry_after > 0
            held_id = held.sandbox.id

            # A waiter queued while the sandbox is busy gets it once it is free.
            async def second() -> str:
                async with pool.lease(python_image, policy, "a") as lease:
                    return lease.sandbox.id

            waiter = asyncio.create_task(second())
            await asyncio.sleep(0.1)
            assert group(pool, policy).waiting == 1
            assert pool.status().waiting == 1
        assert await asyncio.wait_for(waiter, 5) == held_id
    finally:
        await pool.close()


async def test_requests_queue_up_to_the_bound_then_get_429(
    isolated_backend: DockerBackend, python_image: str
) -> None:
    waiters = 2
    pool = Pool(isolated_backend, max_waiters=waiters)
    policy = policy_for("pool-queue-bound")

    async def lease_once() -> str:
        async with pool.lease(python_image, policy, "a") as lease:
            return lease.sandbox.id

    try:
        async with pool.lease(python_image, policy, "a") as held:
            queued = [asyncio.create_task(lease_once()) for _ in range(waiters)]
            deadline = time.monotonic() + 5
            while pool.status().waiting < waiters:
                assert time.monotonic() < deadline, pool.status()
                await asyncio.sleep(0.01)
            started = time.monotonic()
            with pytest.raises(CapacityError) as info:
                await lease_once()
            assert time.monotonic() - started < 0.5  # refused at once
            assert status_and_code(info.value) == (429, "capacity_exhausted")
            assert info.value.retry_after > 0
            assert group(pool, policy).waiting == waiters  # the queue is intact
        # Once the sandbox is free, the waiters get it, one after the other.
        assert await asyncio.wait_for(asyncio.gather(*queued), 20) == [held.sandbox.id] * waiters
        assert pool.status().waiting == 0
    finally:
        await pool.close()


async def until(condition: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the moment never came"
        await asyncio.sleep(0.002)


def states_of(client: docker.DockerClient, owner: str, policy: Policy) -> dict[str, str]:
    labels = [f"{LABEL_OWNER}={owner}", f"{LABEL_POLICY}={policy.name}"]
    return {c["Id"]: c["State"] for c in client.api.containers(all=True, filters={"label": labels})}


@pytest.mark.parametrize(
    "moment",
    ["at-once", "waiting-for-a-start-slot", "creating", "starting", "0.05s", "0.2s", "0.5s"],
)
async def test_a_cancelled_cold_lease_leaks_nothing(
    isolated_backend: DockerBackend,
    python_image: str,
    docker_client: docker.DockerClient,
    moment: str,
) -> None:
    """A lease cancelled while its container starts (a request timeout, a client gone)
    gives back its place and leaves no container the pool does not know of."""
    pool = Pool(isolated_backend, start_concurrency=1, lease_timeout_s=5)
    policy = policy_for(f"pool-cancel-{moment}", max_=2)
    owner = isolated_backend.owner
    creating = isolated_backend._creating  # container creations sent to the engine

    async def lease_once() -> None:
        async with pool.lease(python_image, policy, "t"):
            pass

    try:
        others = []
        if moment == "waiting-for-a-start-slot":
            others.append(asyncio.create_task(lease_once()))
            await until(lambda: creating)  # it holds the only start slot
        victim = asyncio.create_task(lease_once())
        if moment == "at-once":
            await asyncio.sleep(0)
        elif moment == "waiting-for-a-start-slot":
            await until(lambda: group(pool, policy).starting == 2)
        elif moment == "creating":
            await until(lambda: creating)
        elif moment == "starting":
            await until(lambda: creating)
            await until(lambda: not creating)  # created; being started, not handed out yet
        else:
            await asyncio.sleep(float(moment.removesuffix("s")))
        victim.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await victim
        await asyncio.gather(*others)

        status = await settle(pool, policy)
        assert (status.starting, status.busy) == (0, 0)
        states = states_of(docker_client, owner, policy)
        assert sorted(states.values()) == ["running"] * status.idle  # none created and forgotten
        # The whole capacity is still there, and every container is one the pool holds.
        async with contextlib.AsyncExitStack() as stack:
            leases = [
                await stack.enter_async_context(pool.lease(python_image, policy, "t"))
                for _ in range(policy.pool.max)
            ]
            held = {lease.sandbox.id for lease in leases}
            assert len(held) == policy.pool.max
            assert set(states_of(docker_client, owner, policy)) == held
        await pool.close()
        assert containers_of(docker_client, owner) == []
    finally:
        await pool.close()


async def test_status_counts_are_consistent(
    isolated_backend: DockerBackend, python_image: str, docker_client: docker.DockerClient
) -> None:
    pool = Pool(isolated_backend)
    policy = policy_for("pool-status", warm=1, max_=2)
    owner = isolated_backend.owner
    try:
        await pool.warm(python_image, policy, wait=True)
        status = await settle(pool, policy)
        assert (status.idle, status.busy, status.created_total) == (1, 0, 1)
        assert len(containers_of(docker_client, owner, policy)) == 1
        async with pool.lease(python_image, policy, "a"):
            status = await settle(pool, policy)
            assert status.busy == 1
            assert status.idle == 1  # the pool warmed a replacement
            assert status.idle_bound == 0
            assert status.created_total == 2
            assert status.idle + status.busy + status.starting + status.resetting <= status.max
            assert len(containers_of(docker_client, owner, policy)) == 2
        status = await settle(pool, policy)
        assert (status.idle, status.idle_bound, status.busy) == (2, 1, 0)
        assert status.retired_total == 0
        assert status.create_failures_total == 0
        assert pool.status().waiting == 0
        assert len(containers_of(docker_client, owner, policy)) == 2
    finally:
        await pool.close()


async def test_close_leaves_no_container_of_the_pool(
    isolated_backend: DockerBackend, python_image: str, docker_client: docker.DockerClient
) -> None:
    pool = Pool(isolated_backend)
    policy = policy_for("pool-close", warm=2, max_=3)
    await pool.warm(python_image, policy, wait=True)
    owner = isolated_backend.owner
    lease_cm = pool.lease(python_image, policy, "a")
    lease = await lease_cm.__aenter__()
    try:
        ids = containers_of(docker_client, owner)
        assert lease.sandbox.id in ids
        assert len(ids) >= 2
        await pool.close()
        assert containers_of(docker_client, owner) == []
        for container_id in ids:
            await wait_gone(docker_client, container_id)
        with pytest.raises(InfrastructureError, match="shutting down"):
            async with pool.lease(python_image, policy, "a"):
                pass
        # The lease held across close() is dead, not silently usable.
        with pytest.raises(ContainerLostError):
            await lease.sandbox.exec(["true"], limits=exec_limits(policy, None))
    finally:
        with contextlib.suppress(Exception):
            await lease_cm.__aexit__(None, None, None)
        await pool.close()


async def test_closing_one_pool_leaves_another_pools_sandboxes(
    isolated_backend: DockerBackend, python_image: str
) -> None:
    # A second backend of the same process: it gets the same owner label as the first.
    other_backend = DockerBackend()
    other_backend.owner = isolated_backend.owner
    survivor_pool = Pool(isolated_backend)
    closing_pool = Pool(other_backend)
    policy = policy_for("pool-two-pools")
    try:
        async with survivor_pool.lease(python_image, policy, "a") as lease:
            await closing_pool.close()
            await asyncio.sleep(0.5)
            result = await lease.sandbox.exec(["echo", "alive"], limits=exec_limits(policy, None))
            assert result.stdout == b"alive\n"
    finally:
        await survivor_pool.close()


# --------------------------------------------------------------------------------------
# Start concurrency
# --------------------------------------------------------------------------------------


class CountingBackend(DockerBackend):
    """The real backend, counting the creates (container create, start, runner hello) in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.peak = 0
        self.calls = 0

    async def create(self, image: str, policy: Policy) -> Any:  # a DockerSandbox
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            return await super().create(image, policy)
        finally:
            self.in_flight -= 1


def engine_overlap(client: docker.DockerClient, owner: str, since: float) -> tuple[int, int]:
    """From the engine's own events: containers created, and most between create and start."""
    events = client.events(
        since=int(since) - 1,
        until=int(time.time()) + 1,
        decode=True,
        filters={"type": "container", "label": f"{LABEL_OWNER}={owner}"},
    )
    created = 0
    pending: set[str] = set()
    most = 0
    for event in sorted(events, key=lambda e: int(e["timeNano"])):
        if event["Action"] == "create":
            created += 1
            pending.add(event["id"])
            most = max(most, len(pending))
        elif event["Action"] in ("start", "die", "destroy"):
            pending.discard(event["id"])
    return created, most


async def test_a_cold_burst_starts_at_most_start_concurrency_containers_at_once(
    python_image: str, docker_client: docker.DockerClient
) -> None:
    # Six leases at once on a cold group (warm 0, max 6): six containers must be made, and
    # with start_concurrency=2 never more than two are being made at the same time.
    holder = subprocess.Popen(["sleep", "600"])  # lends its identity: see isolated_backend
    try:
        backend = CountingBackend()
        started = psutil.Process(holder.pid).create_time()
        backend.owner = f"{socket.gethostname()}:{holder.pid}:{started:.3f}"
        pool = Pool(backend, start_concurrency=2)
        policy = policy_for("pool-start-concurrency", warm=0, max_=6)
        burst = 6
        served: list[str] = []
        everyone_served = asyncio.Event()
        since = time.time()

        async def lease(tenant: str) -> None:
            async with pool.lease(python_image, policy, tenant) as held:
                served.append(held.sandbox.id)
                if len(served) == burst:
                    everyone_served.set()
                # Held until all are served: six sandboxes exist at once, none reused.
                await asyncio.wait_for(everyone_served.wait(), 60)

        try:
            await asyncio.wait_for(
                asyncio.gather(*(lease(f"tenant-{i}") for i in range(burst))), 120
            )
            assert len(set(served)) == burst
            assert backend.calls == burst
            assert backend.peak == 2  # bounded, and the bound was used
            created, most = engine_overlap(docker_client, backend.owner, since)
            assert created == burst
            assert 1 <= most <= 2
        finally:
            await pool.close()
    finally:
        holder.kill()
        holder.wait()
