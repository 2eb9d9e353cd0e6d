"""Host mounts and extra tmpfs on real containers, and the engine's gVisor runtimes.

``filesystem.mounts`` (read-only host directories under the mount allowlist) and
``filesystem.extra_tmpfs`` run here on the real engine, under both runtimes:
Docker reports them as the policy says, sandboxed code can read a mount but not
change anything in it, and an extra tmpfs is writable, capped at its size and
emptied by the reset between two executions in the same container.

A read-only bind mount is not recursive on Docker 20.10 (a filesystem mounted
below the source stays writable inside the sandbox under runc), so the policy
loader refuses a source with a mount below it; that is checked here with a real
tmpfs mounted below a temporary directory (needs root).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from sandbox.core.execution import BASE_ENV, exec_limits
from sandbox.core.pool import Pool
from sandbox.errors import PolicyError
from sandbox.host.engine import RUNTIME_RUNSC, RUNTIME_RUNSC_NET, SANDBOX_RUNTIMES
from sandbox.policy import (
    MOUNT_ALLOWLIST_ENV,
    Policy,
    load_policy,
    parse_policy,
)
from sandbox.policy.limits import DEFAULT_GID, DEFAULT_UID
from sandbox.results import ExecResult, ExecStatus
from tests.conftest import make_policy

pytestmark = pytest.mark.docker

TENANT = "mounts"
MiB = 1 << 20
TARGET = "/data"
SCRATCH = "/scratch"
SCRATCH_MB = 2
SCRATCH_INODES = 64
INPUT = b"the quick brown fox\n" * 50
NESTED = b"nested input\x00\xff\n"

# Prelude of the snippets: `attempt(fn)` is the errno name of the failure, or "OK".
ATTEMPT = (
    "import errno, json, os\n"
    "def attempt(fn):\n"
    "    try:\n"
    "        fn()\n"
    "    except OSError as e:\n"
    "        return errno.errorcode.get(e.errno, str(e.errno))\n"
    "    return 'OK'\n"
)


# --------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def allowed_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An allowlisted host root holding ``data/``: the mount source.

    Everything in it belongs to the sandbox's uid and is writable by anyone
    (directories 0777, files 0666), so that inside the sandbox only the read-only
    mount can stop a change and the errno must be EROFS (not EACCES or EPERM).
    """
    root = tmp_path_factory.mktemp("mount-root")
    data = root / "data"
    (data / "sub").mkdir(parents=True)
    (data / "input.txt").write_bytes(INPUT)
    (data / "sub" / "nested.bin").write_bytes(NESTED)
    for directory in (data, data / "sub"):
        directory.chmod(0o777)
    for file in (data / "input.txt", data / "sub" / "nested.bin"):
        file.chmod(0o666)
    for path in (data, data / "sub", data / "input.txt", data / "sub" / "nested.bin"):
        os.chown(path, DEFAULT_UID, DEFAULT_GID)
    assert os.path.realpath(root) == str(root)
    return root


@pytest.fixture(scope="module", params=["runc", "runsc"])
def policy(request: pytest.FixtureRequest, allowed_root: Path) -> Policy:
    """A mount of ``data/`` at /data and a 2 MB tmpfs at /scratch, under both runtimes."""
    sections = {
        "runtime": request.param,
        "resources": {"wall_time_s": 5.0, "cpu_time_s": 5.0, "memory_mb": 256},
        "filesystem": {
            "mounts": [{"source": str(allowed_root / "data"), "target": TARGET}],
            "extra_tmpfs": [{"path": SCRATCH, "size_mb": SCRATCH_MB, "inodes": SCRATCH_INODES}],
        },
        "env": {"set": {"TEST_POOL_GROUP": f"mounts-{request.param}"}},
        "pool": {"warm": 0, "max": 1},  # one container: the second execution reuses it
    }
    # The allowlist comes from the environment, as in a deployment.
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(MOUNT_ALLOWLIST_ENV, raising=False)
        with pytest.raises(PolicyError, match="not under an allowlisted root"):
            make_policy(f"mounts-{request.param}", **sections)
        patch.setenv(MOUNT_ALLOWLIST_ENV, str(allowed_root))
        return make_policy(f"mounts-{request.param}", **sections)


def snapshot(directory: Path) -> dict[str, tuple[bytes | None, int, int]]:
    """Every entry below ``directory``: its content (files), mode and mtime."""
    found: dict[str, tuple[bytes | None, int, int]] = {}
    for path in sorted(directory.rglob("*")):
        info = path.lstat()
        content = path.read_bytes() if path.is_file() else None
        found[str(path.relative_to(directory))] = (content, info.st_mode, info.st_mtime_ns)
    info = directory.lstat()
    found["."] = (None, info.st_mode, info.st_mtime_ns)
    return found


async def run(pool: Pool, image: str, policy: Policy, code: str) -> tuple[str, ExecResult]:
    """Run ``code`` in a sandbox of ``policy``; the container's id and the result."""
    async with pool.lease(image, policy, TENANT) as lease:
        result = await lease.sandbox.exec(
            ["python3", "main.py"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            files={"main.py": code.encode()},
        )
        return lease.sandbox.id, result


async def run_json(pool: Pool, image: str, policy: Policy, code: str) -> tuple[str, object]:
    """Run ``code``, which prints one JSON document; the container's id and the document."""
    container, result = await run(pool, image, policy, code)
    assert result.status == ExecStatus.OK, result.stderr.decode(errors="replace")
    return container, json.loads(result.stdout)


# --------------------------------------------------------------------------------------
# Mounts and extra tmpfs on a real container
# --------------------------------------------------------------------------------------


async def test_docker_reports_the_mount_read_only_and_the_tmpfs_sized(
    pool: Pool,
    python_image: str,
    policy: Policy,
    allowed_root: Path,
    docker_client: docker.DockerClient,
) -> None:
    async with pool.lease(python_image, policy, TENANT) as lease:
        info = docker_client.api.inspect_container(lease.sandbox.id)
    (bind,) = [m for m in info["Mounts"] if m["Destination"] == TARGET]
    assert bind["Type"] == "bind"
    assert bind["Source"] == str(allowed_root / "data")
    assert bind["RW"] is False
    (requested,) = [m for m in info["HostConfig"]["Mounts"] if m["Target"] == TARGET]
    assert requested["ReadOnly"] is True
    # No other mount of the host's directory, writable or not.
    assert [m for m in info["Mounts"] if m.get("Source", "").startswith(str(allowed_root))] == [
        bind
    ]
    options = info["HostConfig"]["Tmpfs"][SCRATCH].split(",")
    assert f"size={SCRATCH_MB}m" in options
    assert f"nr_inodes={SCRATCH_INODES}" in options
    assert "rw" in options and "ro" not in options
    assert info["HostConfig"]["ReadonlyRootfs"] is True
    assert info["HostConfig"]["Runtime"] == policy.runtime


async def test_mounted_files_are_readable_and_nothing_in_the_mount_is_writable(
    pool: Pool, python_image: str, policy: Policy, allowed_root: Path
) -> None:
    data = allowed_root / "data"
    assert (policy.user.uid, policy.user.gid) == (DEFAULT_UID, DEFAULT_GID)  # owns data/
    before = snapshot(data)
    code = ATTEMPT + (
        "d = '/data'\n"
        "read = [open(f'{d}/input.txt', 'rb').read().hex(),\n"
        "        open(f'{d}/sub/nested.bin', 'rb').read().hex(), sorted(os.listdir(d))]\n"
        "def write(path, mode):\n"
        "    def fn():\n"
        "        with open(path, mode) as f:\n"
        "            f.write(b'x')\n"
        "    return fn\n"
        "tries = {\n"
        "    'overwrite': write(f'{d}/input.txt', 'wb'),\n"
        "    'append': write(f'{d}/input.txt', 'ab'),\n"
        "    'update': write(f'{d}/input.txt', 'r+b'),\n"
        "    'create': write(f'{d}/new.txt', 'xb'),\n"
        "    'create nested': write(f'{d}/sub/new.bin', 'xb'),\n"
        "    'truncate': lambda: os.truncate(f'{d}/input.txt', 0),\n"
        "    'unlink': lambda: os.unlink(f'{d}/input.txt'),\n"
        "    'unlink nested': lambda: os.unlink(f'{d}/sub/nested.bin'),\n"
        "    'rename': lambda: os.rename(f'{d}/input.txt', f'{d}/moved.txt'),\n"
        "    'mkdir': lambda: os.mkdir(f'{d}/newdir'),\n"
        "    'symlink': lambda: os.symlink('/etc/passwd', f'{d}/link'),\n"
        "    'chmod': lambda: os.chmod(f'{d}/input.txt', 0o600),\n"
        "    'utime': lambda: os.utime(f'{d}/input.txt', (0, 0)),\n"
        "}\n"
        "print(json.dumps([read, {name: attempt(fn) for name, fn in tries.items()}]))\n"
    )
    _, outcome = await run_json(pool, python_image, policy, code)
    assert isinstance(outcome, list)
    read, tries = outcome
    assert read == [INPUT.hex(), NESTED.hex(), ["input.txt", "sub"]]
    assert tries == dict.fromkeys(tries, "EROFS")
    assert len(tries) == 13
    # Nothing changed on the host: contents, entries, modes, times.
    assert snapshot(data) == before


async def test_extra_tmpfs_is_writable_capped_and_emptied_by_the_reset(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    fill = ATTEMPT + (
        "s = '/scratch'\n"
        "os.makedirs(f'{s}/deep/er')\n"
        "open(f'{s}/deep/er/kept.txt', 'w').write('left behind')\n"
        "open(f'{s}/.hidden', 'w').write('left behind')\n"
        "written = 0\n"
        "def fill():\n"
        "    global written\n"
        "    with open(f'{s}/fill', 'wb') as f:\n"
        "        for _ in range(16):\n"
        "            f.write(b'z' * (1 << 18))\n"
        "            f.flush()\n"
        "            written += 1 << 18\n"
        "print(json.dumps([attempt(fill), written, sorted(os.listdir(s))]))\n"
    )
    first, outcome = await run_json(pool, python_image, policy, fill)
    assert isinstance(outcome, list)
    error, written, entries = outcome
    assert error == errno.errorcode[errno.ENOSPC]
    # The cap is the policy's size_mb: about 2 MB went in (less what the small files
    # and directories take), no more.
    assert SCRATCH_MB * MiB // 2 <= written <= SCRATCH_MB * MiB
    assert entries == [".hidden", "deep", "fill"]

    check = ATTEMPT + (
        "s = '/scratch'\n"
        "left = sorted(os.listdir(s))\n"
        "def again():\n"
        "    with open(f'{s}/again', 'wb') as f:\n"
        "        f.write(b'y' * (1 << 20))\n"
        "print(json.dumps([left, oct(os.stat(s).st_mode & 0o7777), attempt(again)]))\n"
    )
    second, outcome = await run_json(pool, python_image, policy, check)
    # The same container (a replaced one would be empty whatever the reset does).
    assert second == first
    # Nothing left, and the space is free again.
    assert outcome == [[], "0o755", "OK"]


# --------------------------------------------------------------------------------------
# A mount source with a filesystem mounted below it is refused
# --------------------------------------------------------------------------------------


def _umount(path: Path) -> None:
    if os.path.ismount(path):
        subprocess.run(["umount", str(path)], check=False)
    if os.path.ismount(path):
        subprocess.run(["umount", "-l", str(path)], check=True)


@pytest.fixture
def submounted(tmp_path: Path) -> Iterator[tuple[Path, list[Path]]]:
    """``root/data`` with a real tmpfs mounted at ``data/deep/er``, and another at
    ``root/with space/in side`` (mountinfo escapes spaces); unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    root = tmp_path / "root"
    points = [root / "data" / "deep" / "er", root / "with space" / "in side"]
    for point in points:
        point.mkdir(parents=True)
    (root / "data" / "plain").mkdir()
    mounted: list[Path] = []
    try:
        for point in points:
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)], check=True
            )
            mounted.append(point)
            assert os.path.ismount(point)
        yield root, points
    finally:
        for point in mounted:
            _umount(point)


def mount_yaml(source: Path) -> str:
    return f"filesystem:\n  mounts:\n    - {{source: '{source}', target: '/data'}}\n"


def test_mount_source_with_a_filesystem_mounted_below_it_is_refused(
    submounted: tuple[Path, list[Path]],
) -> None:
    root, (deep, spaced) = submounted
    allow = [str(root)]
    # From a file: the refusal names the file, the key, the mount below and what to do.
    policy_file = root.parent / "datasets.yaml"
    policy_file.write_text(mount_yaml(root / "data"), encoding="utf-8")
    with pytest.raises(PolicyError) as info:
        load_policy(policy_file, mount_allowlist=allow)
    err = info.value
    assert err.key == "filesystem.mounts[0].source"
    assert err.source == str(policy_file)
    message = str(err)
    assert str(policy_file) in message
    assert "filesystem.mounts[0].source" in message
    assert repr(str(deep)) in message
    assert "mounted below it" in message and "unmount it" in message
    # A mount point any depth below counts, also through an escaped name, and so
    # does the allowlisted root itself.
    for source, below in [
        (root / "data" / "deep", deep),
        (root / "with space", spaced),
        (root, deep),
    ]:
        with pytest.raises(PolicyError, match="mounted below it") as info:
            parse_policy(mount_yaml(source), name="t", mount_allowlist=allow)
        assert repr(str(below)) in str(info.value)
    # The mount points themselves, and directories beside them, are fine: nothing is
    # mounted below them, and the bind makes their own filesystem read-only.
    for source in (deep, spaced, root / "data" / "plain"):
        policy = parse_policy(mount_yaml(source), name="t", mount_allowlist=allow)
        assert policy.filesystem.mounts[0].source == str(source)
    # Once unmounted, the same source loads: the refusal was for the mount below it.
    _umount(deep)
    assert load_policy(policy_file, mount_allowlist=allow).filesystem.mounts[0].source == str(
        root / "data"
    )


# --------------------------------------------------------------------------------------
# The engine's runtimes
# --------------------------------------------------------------------------------------


def test_engine_lists_the_gvisor_runtimes(docker_client: docker.DockerClient) -> None:
    runtimes = docker_client.info()["Runtimes"]
    # runsc has no network at all; runsc-net (allowlist policies) has gVisor's stack.
    assert runtimes[RUNTIME_RUNSC].get("runtimeArgs") == ["--network=none"]
    assert RUNTIME_RUNSC_NET in runtimes
    for name, spec in SANDBOX_RUNTIMES.items():
        assert runtimes[name] == dict(spec), name
