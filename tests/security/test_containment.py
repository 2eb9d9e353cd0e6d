"""Attacks from inside a sandbox, each with the specific safe outcome asserted.

Every test runs real code in a real pool container (or inspects one with the
Docker API); nothing is mocked. Errno values are asserted exactly: an attack
that fails for an unexpected reason is a finding, not a pass.

Every attack runs under both runtimes. gVisor (runsc) is its own kernel: where
it refuses the same thing differently (another errno, a /proc without some
lines), or where the safe outcome itself differs (the runner, not the host's
kernel, stops a memory bomb), the runsc expectation is written out next to the
runc one, with the reason.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping, Sequence

import docker
import pytest

from sandbox.backends.base import JUDGE_DIR, WORKDIR
from sandbox.backends.docker import (
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_POLICY,
    LABEL_POLICY_DIGEST,
    RUNNER_CAPABILITIES,
    RUNNER_NOFILE,
    RUNNER_SOCKET,
    RUNNER_SOCKET_DIR,
    DockerBackend,
    host_memory_limit,
    host_pids_limit,
)
from sandbox.core.execution import BASE_ENV, ExecutionService, RunRequest, exec_limits
from sandbox.core.pool import Pool
from sandbox.policy import Policy
from sandbox.results import ExecLimits, ExecResult, ExecStatus
from tests.conftest import make_policy

pytestmark = pytest.mark.docker

TENANT = "attacker"
UID = 10001
MiB = 1 << 20
SIGXCPU = 24
WALL_S = 2.0
STDOUT_CAP = 64 * 1024
SECRET = "hidden-test-input-7f3a9c"
SECRET_B64 = "aGlkZGVuLXRlc3QtaW5wdXQt"  # base64 of SECRET * 3, cut at 24
# Under gVisor the runner stops a program at the policy's memory limit on the sandbox
# kernel's own count (the host's cgroup, with headroom for that kernel, is a backstop).
RUNNER_MEMORY = (ExecStatus.MEMORY_LIMIT, "memory")
# A fork bomb can outrun that check (its processes cost gVisor megabytes each, much
# of it outside that count): then the host's OOM killer takes the whole sandbox, one
# process to the host, and the backend reports that (the kernel's record of the
# container's memory cgroup) as the execution's verdict; the pool replaces it.
CONTAINER_OOM = (ExecStatus.MEMORY_LIMIT, "container_oom")


def gvisor(policy: Policy) -> bool:
    return policy.runtime == "runsc"


def walk_limits(policy: Policy) -> ExecLimits:
    """Limits for attacks that walk the image's files: through gVisor's gofer that takes
    seconds, more than the policy's wall time, and tens of seconds on a loaded host (the
    outcome asserted is the same)."""
    limits = exec_limits(policy, None)
    if gvisor(policy):
        limits = limits.model_copy(update={"wall_s": 30 * WALL_S, "cpu_s": 30 * WALL_S})
    return limits


@pytest.fixture(scope="module", params=["runc", "runsc"])
def policy(request: pytest.FixtureRequest) -> Policy:
    """Every attack runs under both runtimes: plain containers and gVisor."""
    return make_policy(
        f"containment-{request.param}",
        runtime=request.param,
        resources={
            "cpus": 1.0,
            "memory_mb": 128,
            "pids": 64,
            "wall_time_s": WALL_S,
            "cpu_time_s": WALL_S,
            "stdout_bytes": STDOUT_CAP,
            "stderr_bytes": STDOUT_CAP,
            "open_files": 128,
            "file_size_mb": 32,
        },
        filesystem={
            "workspace": {"size_mb": 4, "inodes": 64},
            "tmp": {"size_mb": 4, "inodes": 64},
            "shm_mb": 4,
        },
        env={"set": {"TEST_POOL_GROUP": f"containment-{request.param}"}},
        pool={"warm": 1, "max": 1},
    )


async def run(
    pool: Pool,
    image: str,
    policy: Policy,
    code: str,
    *,
    argv: Sequence[str] = ("python3", "main.py"),
    stdin: bytes = b"",
    files: Mapping[str, bytes] | None = None,
    limits: ExecLimits | None = None,
    role: str = "sandbox",
) -> ExecResult:
    """Run ``code`` as ``main.py`` in the working directory of ``role``'s uid."""
    async with pool.lease(image, policy, TENANT) as lease:
        return await lease.sandbox.exec(
            list(argv),
            limits=limits or exec_limits(policy, None),
            stdin=stdin,
            env=BASE_ENV,
            files={"main.py": code.encode(), **(files or {})},
            role=role,
            cwd=JUDGE_DIR if role == "judge" else WORKDIR,
        )


async def run_json(
    pool: Pool, image: str, policy: Policy, code: str, *, limits: ExecLimits | None = None
) -> object:
    """Run ``code``, which prints one JSON document; return it."""
    result = await run(pool, image, policy, code, limits=limits)
    assert result.status == ExecStatus.OK, result.stderr.decode(errors="replace")
    return json.loads(result.stdout)


async def still_works(pool: Pool, image: str, policy: Policy) -> None:
    """The next execution in the pool is healthy and sees no leftover of the attack."""
    code = (
        "import os\n"
        "mine = [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()\n"
        "        and os.stat(f'/proc/{p}').st_uid == os.getuid()]\n"
        "print('healthy', mine, sorted(os.listdir('/workspace')), os.listdir('/tmp'))\n"
    )
    result = await run(pool, image, policy, code)
    assert result.status == ExecStatus.OK, result.stderr
    assert result.stdout == b"healthy [] ['main.py'] []\n"


# Prelude shared by the attack snippets: `attempt(fn)` returns the errno name or "OK".
ATTEMPT = (
    "import ctypes, errno, json, os, socket, stat, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "def attempt(fn):\n"
    "    try:\n"
    "        fn()\n"
    "    except OSError as e:\n"
    "        return errno.errorcode.get(e.errno, str(e.errno))\n"
    "    return 'OK'\n"
    "def check(ret):\n"
    "    if ret == -1:\n"
    "        e = ctypes.get_errno()\n"
    "        raise OSError(e, os.strerror(e))\n"
    "    return ret\n"
    "def runner_pid():\n"
    "    for p in os.listdir('/proc'):\n"
    "        if p.isdigit() and p != '1':\n"
    "            st = open(f'/proc/{p}/status').read()\n"
    "            if '\\nPPid:\\t1\\n' in st and '\\nUid:\\t0\\t' in st:\n"
    "                return int(p)\n"
    "    raise SystemExit('runner not found')\n"
)


# --------------------------------------------------------------------------------------
# The container as Docker sees it
# --------------------------------------------------------------------------------------


async def test_container_settings_as_docker_reports_them(
    pool: Pool,
    python_image: str,
    policy: Policy,
    docker_client: docker.DockerClient,
    backend: DockerBackend,
) -> None:
    async with pool.lease(python_image, policy, TENANT) as lease:
        info = docker_client.api.inspect_container(lease.sandbox.id)
    host = info["HostConfig"]
    res = policy.resources
    assert host["Privileged"] is False
    assert host["CapDrop"] == ["ALL"]
    assert sorted(c.removeprefix("CAP_") for c in host["CapAdd"]) == sorted(RUNNER_CAPABILITIES)
    assert not {"SYS_ADMIN", "SYS_PTRACE", "NET_ADMIN", "NET_RAW", "MKNOD", "SYS_CHROOT"} & {
        c.removeprefix("CAP_") for c in host["CapAdd"]
    }
    assert "no-new-privileges:true" in host["SecurityOpt"]
    assert not any("unconfined" in opt for opt in host["SecurityOpt"])
    assert host["ReadonlyRootfs"] is True
    assert host["NetworkMode"] == "none"
    assert info["Config"]["NetworkDisabled"] is True
    assert host["IpcMode"] == "private"
    assert host["PidMode"] in ("", "private")
    assert host["UsernsMode"] == ""
    # Under gVisor the host's limit has headroom for the sandbox kernel; the policy's
    # is the runner's (--memory), on that kernel's count (the memory bombs below).
    assert host["Memory"] == host_memory_limit(policy)
    assert host["Memory"] == res.memory_mb * MiB or gvisor(policy)
    assert host["Memory"] > res.memory_mb * MiB or not gvisor(policy)
    assert host["MemorySwap"] == host["Memory"]
    assert host["NanoCpus"] == int(res.cpus * 1e9)
    assert host["Runtime"] == policy.runtime
    command = info["Config"]["Cmd"]
    if gvisor(policy):
        # The host's pids cgroup counts the gVisor kernel's own threads, not the
        # sandbox's processes: there it is a backstop, and the policy's limit is
        # RLIMIT_NPROC per untrusted uid, set by the runner (and checked by the fork
        # bombs below); the runner also installs its seccomp filter.
        assert host["PidsLimit"] == host_pids_limit(policy) > 2 * res.pids
        memory = str(res.memory_mb * MiB)
        assert command[-6:] == ["--runtime", "runsc", "--nproc", str(res.pids), "--memory", memory]
    else:
        assert host["PidsLimit"] == res.pids
        assert not {"--nproc", "--runtime", "--memory"} & set(command)
        assert command[-2:] == ["--socket", RUNNER_SOCKET]  # the runner's own channel
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in host["Ulimits"]}
    assert ulimits == {
        "nofile": (res.open_files, max(res.open_files, RUNNER_NOFILE)),
        "fsize": (res.file_size_mb * MiB, res.file_size_mb * MiB),
        "core": (0, 0),
    }
    assert host["Init"] is True
    assert host["LogConfig"]["Type"] == "none"
    assert host["Devices"] in (None, [])
    assert host["Binds"] in (None, [])
    assert info["Mounts"] == []
    assert not any("docker.sock" in str(m) for m in (host.get("Mounts") or []))
    tmpfs = host["Tmpfs"]
    if gvisor(policy):
        assert set(tmpfs) == {"/workspace", "/tmp", "/judge"}
    else:  # and the runner socket's directory: root's alone
        assert set(tmpfs) == {"/workspace", "/tmp", "/judge", RUNNER_SOCKET_DIR}
        options = tmpfs[RUNNER_SOCKET_DIR].split(",")
        assert {"mode=0700", "uid=0", "gid=0", "nosuid", "nodev"} <= set(options)
    for path, spec in (
        ("/workspace", policy.filesystem.workspace),
        ("/tmp", policy.filesystem.tmp),
        ("/judge", policy.filesystem.workspace),
    ):
        options = tmpfs[path].split(",")
        assert f"size={spec.size_mb}m" in options
        assert f"nr_inodes={spec.inodes}" in options
        assert "nosuid" in options and "nodev" in options
    assert "mode=0755" in tmpfs["/workspace"].split(",")
    assert f"uid={UID}" in tmpfs["/workspace"].split(",")
    # hidden tests: another uid's private directory
    assert "mode=0700" in tmpfs["/judge"].split(",")
    assert f"uid={policy.user.judge_uid}" in tmpfs["/judge"].split(",")
    assert host["ShmSize"] == policy.filesystem.shm_mb * MiB
    assert info["Config"]["User"] == "0:0"  # the runner; untrusted code drops to UID
    labels = info["Config"]["Labels"]
    assert labels[LABEL_MANAGED] == "1"
    assert labels[LABEL_OWNER] == backend.owner
    assert labels[LABEL_POLICY] == policy.name
    assert labels[LABEL_POLICY_DIGEST] == policy.digest


async def test_untrusted_process_credentials(pool: Pool, python_image: str, policy: Policy) -> None:
    code = ATTEMPT + (
        "def fields(pid):\n"
        "    out = {}\n"
        "    for line in open(f'/proc/{pid}/status'):\n"
        "        key, _, value = line.partition(':')\n"
        "        out[key] = value.split()\n"
        "    return out\n"
        "me, runner = fields('self'), fields(runner_pid())\n"
        "keys = ['Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapAmb', 'NoNewPrivs',\n"
        "        'Seccomp']\n"
        "def prctl(*args):\n"
        "    ret = libc.prctl(*args, *[0] * (5 - len(args)))\n"
        "    return ret if ret >= 0 else errno.errorcode[ctypes.get_errno()]\n"
        "PR_GET_SECCOMP, PR_GET_NO_NEW_PRIVS = 21, 39\n"
        "PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET = 47, 1\n"
        "print(json.dumps({'me': {k: me.get(k) for k in keys}, 'runner_uid': runner['Uid'],\n"
        "                  'ids': [os.getresuid(), os.getresgid(), os.getgroups()],\n"
        "                  'seccomp': prctl(PR_GET_SECCOMP),\n"
        "                  'no_new_privs': prctl(PR_GET_NO_NEW_PRIVS),\n"
        "                  'ambient': sorted({prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap)\n"
        "                                     for cap in range(41)}, key=str)}))\n"
    )
    report = await run_json(pool, python_image, policy, code)
    assert isinstance(report, dict)
    me = report["me"]
    assert me["Uid"] == [str(UID)] * 4
    assert me["Gid"] == [str(UID)] * 4
    assert me["Groups"] == []
    for cap in ("CapInh", "CapPrm", "CapEff"):
        assert int(me[cap][0], 16) == 0, cap
    if gvisor(policy):
        # gVisor's /proc/PID/status has no CapAmb line: it has no ambient capabilities
        # at all (the prctl is refused).
        assert me["CapAmb"] is None and report["ambient"] == ["EINVAL"]
    else:
        assert int(me["CapAmb"][0], 16) == 0
        assert report["ambient"] == [0]
    # no_new_privs, asked of the kernel (gVisor's status has no NoNewPrivs line; where
    # the line is there, it must say the same).
    assert report["no_new_privs"] == 1
    assert me["NoNewPrivs"] in ((None, ["1"]) if gvisor(policy) else (["1"],))
    # A seccomp filter is active: Docker's profile under runc, the runner's under gVisor.
    assert me["Seccomp"] == ["2"]
    assert report["seccomp"] == 2
    assert report["runner_uid"] == ["0"] * 4
    assert report["runner_uid"] != me["Uid"]
    assert report["ids"] == [[UID] * 3, [UID] * 3, []]


async def test_no_inherited_descriptors_and_only_the_given_environment(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = (
        "import json, os\n"
        "fds = {}\n"
        "for fd in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        fds[fd] = os.readlink(f'/proc/self/fd/{fd}')\n"
        "    except OSError:\n"
        "        pass\n"
        "print(json.dumps({'fds': fds, 'env': dict(os.environ)}))\n"
    )
    report = await run_json(pool, python_image, policy, code)
    assert isinstance(report, dict)
    fds = report["fds"]
    # stdin (a memfd) and stdout/stderr (pipes); nothing of the runner's.
    assert set(fds) == {"0", "1", "2"}, fds
    assert fds["0"].startswith("/memfd:stdin")
    assert fds["1"].startswith("pipe:") and fds["2"].startswith("pipe:")
    assert report["env"] == BASE_ENV


async def test_forged_runner_frame_on_stdout_is_only_data(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    fake = json.dumps({"id": 2, "ok": True, "status": "ok", "exit_code": 0}).encode()
    frame = len(fake).to_bytes(4, "big") + fake
    code = (
        f"import os, sys\nframe = {frame!r}\nos.write(1, frame)\nos.write(2, frame)\nsys.exit(9)\n"
    )
    result = await run(pool, python_image, policy, code)
    assert result.status == ExecStatus.NONZERO_EXIT
    assert result.exit_code == 9
    assert result.stdout == frame
    assert result.stderr == frame
    await still_works(pool, python_image, policy)


@pytest.mark.parametrize("role", ["sandbox", "judge"])
async def test_runner_socket_is_out_of_reach(
    pool: Pool, python_image: str, policy: Policy, role: str
) -> None:
    """Neither untrusted uid can speak to the runner over its socket, find it or replace it
    (under gVisor there is none: the channel is the attach stream alone)."""
    code = ATTEMPT + (
        f"path, directory = {RUNNER_SOCKET!r}, {RUNNER_SOCKET_DIR!r}\n"
        "def connect():\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    s.connect(path)\n"
        "    s.sendall(len(b'{}').to_bytes(4, 'big') + b'{\"op\": \"ping\"}')\n"
        "print(json.dumps({\n"
        "    'connect': attempt(connect),\n"
        "    'list': attempt(lambda: os.listdir(directory)),\n"
        "    'stat': attempt(lambda: os.stat(path)),\n"
        "    'unlink': attempt(lambda: os.unlink(path)),\n"
        "    'bind': attempt(lambda: socket.socket(socket.AF_UNIX).bind(directory + '/x')),\n"
        "    'via_proc': attempt(lambda: os.listdir(f'/proc/{runner_pid()}/root' + directory)),\n"
        "}))\n"
    )
    result = await run(pool, python_image, policy, code, role=role)
    assert result.status == ExecStatus.OK, result.stderr.decode(errors="replace")
    outcome = json.loads(result.stdout)
    refused = "ENOENT" if gvisor(policy) else "EACCES"
    assert outcome == {
        "connect": refused,
        "list": refused,
        "stat": refused,
        "unlink": refused,
        "bind": refused,
        # the runner's /proc entries are root's (not dumpable to another uid)
        "via_proc": "EACCES",
    }
    await still_works(pool, python_image, policy)


# --------------------------------------------------------------------------------------
# Resource exhaustion
# --------------------------------------------------------------------------------------


async def test_memory_bomb_is_stopped(pool: Pool, python_image: str, policy: Policy) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(b'x' * (10 << 20))\n"
    started = time.monotonic()
    result = await run(pool, python_image, policy, code)
    assert time.monotonic() - started < WALL_S + 1.5
    if gvisor(policy):
        # gVisor has no OOM killer of its own: the runner kills the program when the
        # sandbox kernel's count passes the limit, long before the host's (with its
        # headroom) is near, so the sandbox lives on.
        assert (result.status, result.reason) == RUNNER_MEMORY
        assert result.signal == 9
        await still_works(pool, python_image, policy)
        return
    assert result.status == ExecStatus.MEMORY_LIMIT
    assert result.signal == 9
    assert result.usage.peak_memory_bytes is not None
    # It grew to the limit and no further (RSS also counts shared, mapped library pages).
    limit = policy.resources.memory_mb * MiB
    assert limit * 0.6 <= result.usage.peak_memory_bytes <= limit + 32 * MiB
    await still_works(pool, python_image, policy)


async def test_memory_bomb_through_the_service_is_a_verdict_not_infra(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    service = ExecutionService(pool, {"c": policy}, lambda _: python_image)
    code = "x = bytearray()\nwhile True:\n    x += b'y' * (8 << 20)\n"
    result = await service.run(RunRequest(code=code, policy="c"), tenant=TENANT)
    assert result.status == ExecStatus.MEMORY_LIMIT
    assert result.error is None
    after = await service.run(RunRequest(code="print('next')", policy="c"), tenant=TENANT)
    assert after.status == ExecStatus.OK
    assert after.stdout == b"next\n"


async def test_lowered_memory_limit_is_enforced(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    """A request may lower the memory limit below the container's: the runner enforces it
    (from the cgroup's counter; under gVisor, which has none inside, from /proc/meminfo)."""
    code = "import time\nchunks = []\nwhile True:\n    chunks.append(b'x' * (2 << 20))\n"
    code += "    time.sleep(0.01)\n"
    limits = exec_limits(policy, None).model_copy(update={"memory_bytes": 48 * MiB})
    result = await run(pool, python_image, policy, code, limits=limits)
    assert result.status == ExecStatus.MEMORY_LIMIT
    assert result.reason == "memory"
    assert result.usage.wall_s < WALL_S
    await still_works(pool, python_image, policy)


FORK_BOMBS = {
    "python_fork_loop": ("python3", "main.py"),
    "python_fork_loop_ignoring_errors": ("python3", "stubborn.py"),
    "bash_classic": ("bash", "-c", ":(){ :|:& };:"),
    "bash_waiting": ("bash", "-c", ":(){ :|:& };:\nwait\nsleep 10"),
}
FORK_FILES = {
    "stubborn.py": (
        b"import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
}


@pytest.mark.parametrize("kind", sorted(FORK_BOMBS))
async def test_fork_bomb_is_contained(
    pool: Pool, python_image: str, policy: Policy, kind: str
) -> None:
    started = time.monotonic()
    result = await run(
        pool,
        python_image,
        policy,
        "import os\nwhile True:\n    os.fork()\n",
        argv=FORK_BOMBS[kind],
        files=FORK_FILES,
    )
    elapsed = time.monotonic() - started
    assert elapsed < WALL_S + 3.5  # the wall limit plus the kill of every process
    if gvisor(policy) and (result.status, result.reason) in (RUNNER_MEMORY, CONTAINER_OOM):
        # Under gVisor RLIMIT_NPROC (the policy's pids, per untrusted uid) stops the
        # bomb, unless its processes exhaust the sandbox's memory first (each costs
        # gVisor megabytes, not Linux's copy-on-write pages): at 128 MB the Python
        # bombs always do, the bash ones sometimes. The runner's memory check stops
        # them, or when they outrun it, the host's OOM killer (see CONTAINER_OOM).
        # Either is a verdict, never a lost container. Otherwise, as under runc:
        pass
    elif kind == "python_fork_loop":
        # The first failing fork ends the main process with a traceback.
        assert result.status == ExecStatus.NONZERO_EXIT
        assert b"BlockingIOError: [Errno 11] Resource temporarily unavailable" in result.stderr
    elif kind in ("python_fork_loop_ignoring_errors", "bash_waiting"):
        assert result.status == ExecStatus.TIMEOUT
        # The wall limit, or the CPU limit on the container's counter: with one CPU of
        # quota the bomb's processes burn CPU time as fast as the wall clock runs, so
        # either can be reached first (both are 2 s here).
        assert result.reason in ("wall_time", "cpu_time"), result
    else:  # the classic returns at once; its descendants are killed with it
        assert result.status in (ExecStatus.OK, ExecStatus.NONZERO_EXIT)
        assert result.reason is None
    await still_works(pool, python_image, policy)


async def test_process_count_is_capped_by_the_policy(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = (
        "import json, os\n"
        "children, error = 0, None\n"
        f"while children < {4 * policy.resources.pids}:\n"
        "    try:\n"
        "        os.posix_spawn('/bin/sleep', ['sleep', '60'], {})\n"  # vfork: no copy
        "    except OSError as e:\n"
        "        error = e.errno\n"
        "        break\n"
        "    children += 1\n"
        "print(json.dumps([children, error]))\n"
    )
    outcome = await run_json(pool, python_image, policy, code)
    pids = policy.resources.pids
    assert isinstance(outcome, list)
    children, error = outcome
    assert error == 11  # EAGAIN
    if gvisor(policy):
        # RLIMIT_NPROC of the untrusted uid, enforced by gVisor's kernel (which lets
        # the uid reach the limit itself, one task more than Linux would).
        assert children == pids
    else:
        # The container's pids cgroup, which also counts init, the runner and the zygote.
        assert pids - 8 <= children < pids
    await still_works(pool, python_image, policy)


async def test_busy_loop_times_out(pool: Pool, python_image: str, policy: Policy) -> None:
    started = time.monotonic()
    result = await run(pool, python_image, policy, "while True:\n    pass\n")
    elapsed = time.monotonic() - started
    assert result.status == ExecStatus.TIMEOUT
    # Stopped by the runner's wall or CPU watch, or by the kernel at RLIMIT_CPU: whichever
    # came first (wall and CPU limits are both 2 s here).
    assert result.reason in ("wall_time", "cpu_time") or (
        result.reason is None and result.signal == SIGXCPU
    ), result
    assert elapsed < WALL_S + 1.5
    assert result.usage.wall_s < WALL_S + 1.5


async def test_sleep_times_out(pool: Pool, python_image: str, policy: Policy) -> None:
    started = time.monotonic()
    result = await run(pool, python_image, policy, "import time\ntime.sleep(60)\n")
    elapsed = time.monotonic() - started
    assert result.status == ExecStatus.TIMEOUT
    assert result.reason == "wall_time"
    assert WALL_S <= result.usage.wall_s < WALL_S + 1.5
    assert elapsed < WALL_S + 1.5


SIGTERM_IGNORER = (
    "import signal, time\n"
    "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
    "    signal.signal(s, signal.SIG_IGN)\n"
    "print('ignoring', flush=True)\n"
    "while True:\n"
    "    time.sleep(0.01)\n"
)


async def test_sigterm_ignoring_process_is_killed(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    started = time.monotonic()
    result = await run(pool, python_image, policy, SIGTERM_IGNORER)
    assert result.status == ExecStatus.TIMEOUT
    assert result.reason == "wall_time"
    assert result.signal == 9  # SIGTERM was ignored: SIGKILL ended it
    assert result.stdout == b"ignoring\n"
    assert time.monotonic() - started < WALL_S + 1.5
    await still_works(pool, python_image, policy)


async def test_sigterm_ignoring_timeout_is_a_verdict_not_an_infra_error(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    """Otherwise code can turn its own timeout into reward null by ignoring SIGTERM."""
    service = ExecutionService(pool, {"c": policy}, lambda _: python_image)
    result = await service.run(RunRequest(code=SIGTERM_IGNORER, policy="c"), tenant=TENANT)
    assert result.status == ExecStatus.TIMEOUT, result.error
    assert result.error is None


async def test_sigterm_ignoring_child_of_a_finished_program_is_killed(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = (
        "import os, signal, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    time.sleep(60)\n"
        "print('parent done')\n"
    )
    result = await run(pool, python_image, policy, code)
    assert result.status == ExecStatus.OK
    assert result.stdout == b"parent done\n"
    assert result.usage.wall_s < 1.0
    await still_works(pool, python_image, policy)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
async def test_output_flood_is_capped(
    pool: Pool, python_image: str, policy: Policy, stream: str
) -> None:
    code = f"import sys\nwhile True:\n    print('x' * 1000, file=sys.{stream})\n"
    started = time.monotonic()
    result = await run(pool, python_image, policy, code)
    assert result.status == ExecStatus.OUTPUT_LIMIT
    assert result.reason == "output"
    assert time.monotonic() - started < WALL_S
    captured = result.stdout if stream == "stdout" else result.stderr
    assert len(captured) == STDOUT_CAP
    assert getattr(result, f"{stream}_truncated") is True
    assert captured == ((b"x" * 1000 + b"\n") * (STDOUT_CAP // 1001 + 1))[:STDOUT_CAP]


# --------------------------------------------------------------------------------------
# Filesystem
# --------------------------------------------------------------------------------------


async def test_system_paths_are_not_writable(pool: Pool, python_image: str, policy: Policy) -> None:
    targets = [
        "/planted",
        "/usr/planted",
        "/usr/bin/python3",
        "/etc/planted",
        "/etc/passwd",
        "/opt/sandbox/runner/planted.py",
        "/opt/sandbox/runner/__main__.py",
        "/root/planted",
        "/var/tmp/planted",
    ]
    code = ATTEMPT + (
        f"targets = {targets!r}\n"
        "out = {t: attempt(lambda t=t: open(t, 'ab').close()) for t in targets}\n"
        "out['mkdir /opt/sandbox/x'] = attempt(lambda: os.mkdir('/opt/sandbox/x'))\n"
        "out['chmod runner'] = attempt(lambda: os.chmod('/opt/sandbox/runner', 0o777))\n"
        "out['rename runner'] = attempt(lambda: os.rename('/opt/sandbox/runner',\n"
        "                                                  '/opt/sandbox/moved'))\n"
        "print(json.dumps(out))\n"
    )
    report = await run_json(pool, python_image, policy, code)
    if gvisor(policy):
        # gVisor checks the caller's permission on the directory (or file) before the
        # mount's read-only flag; where the uid has permission (/var/tmp is 1777), the
        # read-only root answers.
        assert report == {
            "/planted": "EACCES",
            "/usr/planted": "EACCES",
            "/usr/bin/python3": "EACCES",
            "/etc/planted": "EACCES",
            "/etc/passwd": "EACCES",
            "/opt/sandbox/runner/planted.py": "EACCES",
            "/opt/sandbox/runner/__main__.py": "EACCES",
            "/root/planted": "EACCES",
            "/var/tmp/planted": "EROFS",
            "mkdir /opt/sandbox/x": "EROFS",
            "chmod runner": "EPERM",  # not the owner
            "rename runner": "EROFS",
        }
        return
    # New files: the root is read-only. Existing files the uid may not write: permission.
    assert report == {
        "/planted": "EROFS",
        "/usr/planted": "EROFS",
        "/usr/bin/python3": "EACCES",
        "/etc/planted": "EROFS",
        "/etc/passwd": "EACCES",
        "/opt/sandbox/runner/planted.py": "EROFS",
        "/opt/sandbox/runner/__main__.py": "EACCES",
        "/root/planted": "EACCES",
        "/var/tmp/planted": "EROFS",
        "mkdir /opt/sandbox/x": "EROFS",
        "chmod runner": "EROFS",
        "rename runner": "EROFS",
    }


@pytest.mark.parametrize("directory", ["/workspace", "/tmp", "/dev/shm"])
async def test_writing_past_the_tmpfs_size_fails(
    pool: Pool, python_image: str, policy: Policy, directory: str
) -> None:
    code = ATTEMPT + (
        "written = 0\n"
        "def fill():\n"
        "    global written\n"
        f"    with open('{directory}/fill', 'wb') as f:\n"
        "        for _ in range(64):\n"
        "            f.write(b'z' * (1 << 20))\n"
        "            f.flush()\n"
        "            written += 1 << 20\n"
        "print(json.dumps([attempt(fill), written]))\n"
    )
    outcome = await run_json(pool, python_image, policy, code)
    assert isinstance(outcome, list)
    assert outcome[0] == "ENOSPC"
    assert outcome[1] <= 4 * MiB
    await still_works(pool, python_image, policy)


@pytest.mark.parametrize("directory", ["/workspace", "/tmp"])
async def test_inode_exhaustion_fails(
    pool: Pool, python_image: str, policy: Policy, directory: str
) -> None:
    code = ATTEMPT + (
        "made = 0\n"
        "def many():\n"
        "    global made\n"
        "    for i in range(1000):\n"
        f"        open(f'{directory}/f{{i}}', 'w').close()\n"
        "        made += 1\n"
        "print(json.dumps([attempt(many), made]))\n"
    )
    outcome = await run_json(pool, python_image, policy, code)
    assert isinstance(outcome, list)
    if gvisor(policy):
        # gVisor's tmpfs has no inode limit (nr_inodes is ignored; size= holds, see
        # above): files cost the sandbox's own memory, under its memory limit, and the
        # reset removes every one of them (still_works).
        assert outcome == ["OK", 1000]
    else:
        assert outcome[0] == "ENOSPC"
        assert outcome[1] < 64
    await still_works(pool, python_image, policy)


# --------------------------------------------------------------------------------------
# Network
# --------------------------------------------------------------------------------------


async def test_no_network(pool: Pool, python_image: str, policy: Policy) -> None:
    # A service listening on the host's loopback: the sandbox must not reach it.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.2)
        port = listener.getsockname()[1]
        code = ATTEMPT + (
            "def connect(host, port):\n"
            "    with socket.create_connection((host, port), timeout=2):\n"
            "        pass\n"
            "def resolve():\n"
            "    try:\n"
            "        socket.getaddrinfo('example.com', 80)\n"
            "    except socket.gaierror as e:\n"
            "        raise OSError(errno.EHOSTUNREACH, str(e)) from None\n"
            "out = {\n"
            f"    'host_loopback': attempt(lambda: connect('127.0.0.1', {port})),\n"
            "    'loopback_80': attempt(lambda: connect('127.0.0.1', 80)),\n"
            "    'test_net': attempt(lambda: connect('192.0.2.1', 80)),\n"
            "    'test_net_v6': attempt(lambda: connect('2001:db8::1', 80)),\n"
            "    'dns': attempt(resolve),\n"
            "    'interfaces': sorted(os.listdir('/sys/class/net')),\n"
            "    'routes': open('/proc/net/route').read().splitlines()[1:],\n"
            "    'unix': [l.split()[-1] for l in open('/proc/net/unix').read().splitlines()[1:]\n"
            "             if len(l.split()) > 7],\n"
            "}\n"
            "print(json.dumps(out))\n"
        )
        report = await run_json(pool, python_image, policy, code)
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing ever reached the host's listener
    assert isinstance(report, dict)
    assert report["host_loopback"] == "ECONNREFUSED"  # its own, empty loopback
    assert report["loopback_80"] == "ECONNREFUSED"
    if gvisor(policy):
        # gVisor's network stack, with nothing but loopback, answers "no route to host".
        assert report["test_net"] == report["test_net_v6"] == "EHOSTUNREACH"
    else:
        assert report["test_net"] == "ENETUNREACH"
        assert report["test_net_v6"] in ("ENETUNREACH", "EADDRNOTAVAIL")
    assert report["dns"] == "EHOSTUNREACH"  # our stand-in for gaierror: no resolution
    assert report["interfaces"] == ["lo"]
    assert report["routes"] == []
    assert not any("docker" in path or "containerd" in path for path in report["unix"])


async def test_no_docker_socket(pool: Pool, python_image: str, policy: Policy) -> None:
    code = (
        "import json, os, stat\n"
        "found = []\n"
        "for root, dirs, files in os.walk('/', onerror=lambda e: None):\n"
        "    if root in ('/proc', '/sys'):\n"
        "        dirs[:] = []\n"
        "        continue\n"
        "    for name in files + dirs:\n"
        "        path = os.path.join(root, name)\n"
        "        try:\n"
        "            if stat.S_ISSOCK(os.lstat(path).st_mode) or 'docker.sock' in name:\n"
        "                found.append(path)\n"
        "        except OSError:\n"
        "            pass\n"
        "print(json.dumps({'sockets': found,\n"
        "                  'exists': [os.path.lexists(p) for p in\n"
        "                             ('/var/run/docker.sock', '/run/docker.sock')]}))\n"
    )
    report = await run_json(pool, python_image, policy, code, limits=walk_limits(policy))
    assert report == {"sockets": [], "exists": [False, False]}


# --------------------------------------------------------------------------------------
# The runner and init are out of reach
# --------------------------------------------------------------------------------------


async def test_a_waiting_spares_stdin_cannot_be_poisoned(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    """After a judge run the runner holds a second spare for the next execution. Code
    that reaches its stdin memfd through /proc (gVisor lets any uid reopen it) and
    writes there must not be read by the next program: the runner empties the memfd
    when it hands the spare its request."""
    poison = ATTEMPT + (
        "hit = []\n"
        "pid = runner_pid()\n"
        "fds = os.listdir(f'/proc/{pid}/fd') if os.access(f'/proc/{pid}/fd', os.R_OK) else []\n"
        "for fd in fds:\n"
        "    try:\n"
        "        if 'memfd:stdin' in os.readlink(f'/proc/{pid}/fd/{fd}'):\n"
        "            w = os.open(f'/proc/{pid}/fd/{fd}', os.O_WRONLY)\n"
        "            os.write(w, b'INJECTED\\n' * 8)\n"
        "            os.close(w)\n"
        "            hit.append(fd)\n"
        "    except OSError:\n"
        "        pass\n"
        "print(json.dumps(hit))\n"
    )
    read_stdin = "import sys\nprint(repr(sys.stdin.read()))\n"
    limits = exec_limits(policy, None)
    async with pool.lease(python_image, policy, TENANT) as lease:
        paired = await lease.sandbox.exec(
            ["true"], limits=limits, env=BASE_ENV, peer={"argv": ["true"]}
        )
        assert paired.status == ExecStatus.OK, paired
        attacked = await lease.sandbox.exec(
            ["python3", "main.py"], limits=limits, env=BASE_ENV, files={"main.py": poison.encode()}
        )
        assert attacked.status == ExecStatus.OK, attacked.stderr
        for stdin in (b"", b"x"):
            victim = await lease.sandbox.exec(
                ["python3", "main.py"],
                limits=limits,
                env=BASE_ENV,
                stdin=stdin,
                files={"main.py": read_stdin.encode()},
            )
            assert victim.stdout == f"{stdin.decode()!r}\n".encode(), (attacked.stdout, victim)


async def test_runner_and_init_cannot_be_signalled_traced_or_inspected(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = ATTEMPT + (
        "PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206\n"
        "def reopened(pid):\n"
        "    # What each of its descriptors reopened through /proc gives this uid.\n"
        "    found = []\n"
        "    for fd in (os.listdir(f'/proc/{pid}/fd') if os.access(f'/proc/{pid}/fd', os.R_OK)\n"
        "               else []):\n"
        "        for flags in (os.O_RDONLY, os.O_WRONLY):\n"
        "            try:\n"
        "                os.close(os.open(f'/proc/{pid}/fd/{fd}', flags | os.O_NONBLOCK))\n"
        "            except OSError:\n"
        "                continue\n"
        "            found.append(os.readlink(f'/proc/{pid}/fd/{fd}'))\n"
        "    return found\n"
        "def environ_names(pid):\n"
        "    try:\n"
        "        data = open(f'/proc/{pid}/environ', 'rb').read()\n"
        "    except OSError:\n"
        "        return None\n"
        "    return sorted(e.split(b'=')[0].decode() for e in data.split(b'\\0') if e)\n"
        "out = {}\n"
        "for name, pid in (('runner', runner_pid()), ('init', 1)):\n"
        "    out[name] = {\n"
        "        'pid': pid,\n"
        "        'kill': attempt(lambda: os.kill(pid, 9)),\n"
        "        'term': attempt(lambda: os.kill(pid, 15)),\n"
        "        'stop': attempt(lambda: os.kill(pid, 19)),\n"
        "        'ptrace_attach': attempt(lambda: check(libc.ptrace(PTRACE_ATTACH, pid, 0, 0))),\n"
        "        'ptrace_seize': attempt(lambda: check(libc.ptrace(PTRACE_SEIZE, pid, 0, 0))),\n"
        "        'fd': attempt(lambda: os.listdir(f'/proc/{pid}/fd')),\n"
        "        'fd1': attempt(lambda: open(f'/proc/{pid}/fd/1', 'wb')),\n"
        "        'environ': attempt(lambda: open(f'/proc/{pid}/environ', 'rb').read()),\n"
        "        'mem': attempt(lambda: open(f'/proc/{pid}/mem', 'rb')),\n"
        "        'root': attempt(lambda: os.readlink(f'/proc/{pid}/root')),\n"
        "        'root_list': attempt(lambda: os.listdir(f'/proc/{pid}/root/')),\n"
        "        'cwd': attempt(lambda: os.readlink(f'/proc/{pid}/cwd')),\n"
        "        'oom_adj': attempt(lambda: open(f'/proc/{pid}/oom_score_adj', 'w')\n"
        "                           .write('1000')),\n"
        "        'reopened': reopened(pid),\n"
        "        'environ_names': environ_names(pid),\n"
        "    }\n"
        "print(json.dumps(out))\n"
    )
    async with pool.lease(python_image, policy, TENANT) as lease:
        before = await lease.sandbox.exec(
            ["python3", "main.py"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            files={"main.py": code.encode()},
        )
        assert before.status == ExecStatus.OK, before.stderr
        report = json.loads(before.stdout)
        assert await lease.sandbox.ping()
        again = await lease.sandbox.exec(
            ["python3", "main.py"],
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            files={"main.py": code.encode()},
        )
        assert again.status == ExecStatus.OK
        # The same runner answers: it was neither killed nor stopped.
        assert json.loads(again.stdout)["runner"]["pid"] == report["runner"]["pid"]
    for name in ("runner", "init"):
        attempts = report[name]
        assert attempts["kill"] == attempts["term"] == attempts["stop"] == "EPERM", attempts
        assert attempts["ptrace_attach"] == attempts["ptrace_seize"] == "EPERM", attempts
        for key in ("fd1", "mem", "root", "root_list", "cwd"):
            assert attempts[key] == "EACCES", (name, key, attempts[key])
        assert attempts["oom_adj"] == "EACCES"
        if gvisor(policy):
            # gVisor lists any process's descriptors and shows its environment, but a
            # descriptor reopened through /proc is checked against the file itself: the
            # channel, pipes and sockets refuse; only what anyone may open anyway opens
            # (the runner's stdin, /dev/null, and its /proc/meminfo, read-only). The
            # environment is the container's fixed one, no secret in it.
            assert attempts["fd"] == attempts["environ"] == "OK", attempts
            expected = ["/dev/null", "/dev/null", "/proc/meminfo"] if name == "runner" else []
            # And the stdin memfd of the spare the runner keeps for the next execution:
            # empty, and emptied again before use (see the poisoning test above).
            reopened = attempts["reopened"]
            spare_stdin = [f for f in reopened if f == "/memfd:stdin (deleted)"]
            assert len(spare_stdin) <= 2 and (name == "runner" or not spare_stdin), reopened
            others = sorted(f for f in reopened if f not in spare_stdin)
            assert others == expected, (name, reopened)
            # The runner starts under `env -i` with PATH, LANG and HOME only: nothing an
            # image's ENV sets reaches it.
            names = ["HOME", "LANG", "PATH"]
            names = names if name == "runner" else ["HOME", "HOSTNAME", "LANG", "PATH"]
            assert attempts["environ_names"] == names, (name, attempts["environ_names"])
        else:
            assert attempts["fd"] == attempts["environ"] == "EACCES", attempts
            assert attempts["reopened"] == [] and attempts["environ_names"] is None
    assert report["init"]["pid"] == 1
    assert report["runner"]["pid"] > 1


async def test_setuid_binaries_do_not_give_privileges(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = ATTEMPT + (
        "import subprocess, time\n"
        "special = []\n"
        "for d in ('/usr/bin', '/usr/sbin', '/bin', '/sbin', '/usr/lib'):\n"
        "    for root, _, files in os.walk(d):\n"
        "        for f in files:\n"
        "            p = os.path.join(root, f)\n"
        "            m = os.lstat(p).st_mode\n"
        "            if stat.S_ISREG(m) and m & (stat.S_ISUID | stat.S_ISGID) and m & 0o111:\n"
        "                special.append(p)\n"
        "procs = [(p, subprocess.Popen([p], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,\n"
        "                              stderr=subprocess.DEVNULL)) for p in special]\n"
        "time.sleep(0.5)\n"
        "seen = {}\n"
        "for path, proc in procs:\n"
        "    st = open(f'/proc/{proc.pid}/status').read().splitlines()\n"
        "    seen[path] = [l.split(None, 1)[1] for l in st\n"
        "                  if l.startswith(('Uid:', 'Gid:', 'CapEff:'))]\n"
        "    proc.kill()\n"
        "    proc.wait()\n"
        "out = {'seen': seen,\n"
        "       'setuid0': attempt(lambda: os.setuid(0)),\n"
        "       'seteuid0': attempt(lambda: os.seteuid(0)),\n"
        "       'setgid0': attempt(lambda: os.setgid(0)),\n"
        "       'setgroups': attempt(lambda: os.setgroups([0]))}\n"
        "print(json.dumps(out))\n"
    )
    report = await run_json(pool, python_image, policy, code, limits=walk_limits(policy))
    assert isinstance(report, dict)
    seen = report["seen"]
    assert "/usr/bin/su" in seen  # the image has setuid binaries: the test is meaningful
    for path, fields in seen.items():
        assert fields[0].split() == [str(UID)] * 4, (path, fields)
        assert fields[1].split() == [str(UID)] * 4, (path, fields)
        assert int(fields[2], 16) == 0, (path, fields)
    assert report["setuid0"] == report["seteuid0"] == report["setgid0"] == "EPERM"
    assert report["setgroups"] == "EPERM"


async def test_privileged_operations_are_refused(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    code = ATTEMPT + (
        "import fcntl, termios\n"
        "CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET = 0x10000000, 0x20000, 0x40000000\n"
        "os.mkdir('/tmp/mnt')\n"
        "librt = ctypes.CDLL('librt.so.1', use_errno=True)\n"
        "SYS_add_key = 248\n"
        "out = {\n"
        "  'raw_socket': attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW,\n"
        "                                              socket.IPPROTO_ICMP)),\n"
        "  'packet_socket': attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW)),\n"
        "  'mknod_char': attempt(lambda: os.mknod('/tmp/mem', stat.S_IFCHR | 0o666,\n"
        "                                         os.makedev(1, 1))),\n"
        "  'mknod_block': attempt(lambda: os.mknod('/tmp/vda', stat.S_IFBLK | 0o666,\n"
        "                                          os.makedev(254, 0))),\n"
        "  'mount_tmpfs': attempt(lambda: check(libc.mount(b'none', b'/tmp/mnt', b'tmpfs',\n"
        "                                                  0, None))),\n"
        "  'remount_root_rw': attempt(lambda: check(libc.mount(b'none', b'/', None,\n"
        "                                                      0x20, None))),\n"
        "  'umount_workspace': attempt(lambda: check(libc.umount2(b'/workspace', 0))),\n"
        "  'chroot': attempt(lambda: os.chroot('/tmp')),\n"
        "  'unshare_user': attempt(lambda: check(libc.unshare(CLONE_NEWUSER))),\n"
        "  'unshare_mount': attempt(lambda: check(libc.unshare(CLONE_NEWNS))),\n"
        "  'unshare_net': attempt(lambda: check(libc.unshare(CLONE_NEWNET))),\n"
        "  'proc_sys': attempt(lambda: open('/proc/sys/kernel/hostname', 'w').write('x')),\n"
        "  'proc_sys_core': attempt(lambda: open('/proc/sys/kernel/core_pattern', 'w')\n"
        "                           .write('|/tmp/x')),\n"
        "  'sysrq': attempt(lambda: open('/proc/sysrq-trigger', 'w').write('b')),\n"
        "  'sys_write': attempt(lambda: open('/sys/kernel/uevent_helper', 'w').write('/x')),\n"
        "  'tiocsti_stdin': attempt(lambda: fcntl.ioctl(0, termios.TIOCSTI, b'x')),\n"
        "  'tiocsti_stdout': attempt(lambda: fcntl.ioctl(1, termios.TIOCSTI, b'x')),\n"
        "  'dev_tty': attempt(lambda: os.open('/dev/tty', os.O_RDWR)),\n"
        "  'add_key': attempt(lambda: check(libc.syscall(SYS_add_key, b'user', b'k', b'v', 1,\n"
        "                                                -2))),\n"
        "  'mq_open': attempt(lambda: check(librt.mq_open(b'/planted', os.O_CREAT | os.O_RDWR,\n"
        "                                                 0o600, None))),\n"
        "  'sethostname': attempt(lambda: socket.sethostname('evil')),\n"
        "  'settime': attempt(lambda: check(libc.clock_settime(0, ctypes.byref(\n"
        "                                  (ctypes.c_long * 2)(0, 0))))),\n"
        "  'chown_to_root': attempt(lambda: os.chown('/workspace/main.py', 0, 0)),\n"
        "  'nice_negative': attempt(lambda: os.nice(-5)),\n"
        "}\n"
        "print(json.dumps(out))\n"
    )
    report = await run_json(pool, python_image, policy, code)
    assert isinstance(report, dict)
    expected = {
        "raw_socket": "EPERM",
        "packet_socket": "EPERM",
        "mknod_char": "EPERM",
        "mknod_block": "EPERM",
        "mount_tmpfs": "EPERM",
        "remount_root_rw": "EPERM",
        "umount_workspace": "EPERM",
        "chroot": "EPERM",
        "unshare_user": "EPERM",
        "unshare_mount": "EPERM",
        "unshare_net": "EPERM",
        "proc_sys": "EROFS",
        "proc_sys_core": "EROFS",
        "sysrq": "ENOENT",  # masked by the runtime
        "sys_write": "EROFS",
        "tiocsti_stdin": "ENOTTY",  # no terminal anywhere to inject into
        "tiocsti_stdout": "ENOTTY",
        "dev_tty": "ENXIO",
        "add_key": "EPERM",  # the kernel keyring is off limits
        "mq_open": "EMFILE",  # RLIMIT_MSGQUEUE is 0: no POSIX queue outlives a reset
        "sethostname": "EPERM",
        "settime": "EPERM",
        "chown_to_root": "EPERM",
        "nice_negative": "EPERM",
    }
    if gvisor(policy):
        # The same refusals by gVisor's kernel, with its own errno: it checks the
        # caller's permission on a file before the read-only mount or the masking.
        expected |= {
            "proc_sys": "EACCES",
            "proc_sys_core": "EACCES",
            "sysrq": "EACCES",  # present, not writable, and no host kernel behind it
            "sys_write": "EACCES",
            "dev_tty": "EIO",  # no controlling terminal
            "add_key": "EACCES",
            # gVisor cannot set RLIMIT_MSGQUEUE; the runner's seccomp filter refuses
            # POSIX queues instead (and System V IPC, which the reset cannot see there).
            "mq_open": "ENOSYS",
            # gVisor lets a process lower its nice value: a number inside the sandbox
            # kernel, which schedules no task by priority (the host sees one sandbox).
            "nice_negative": "OK",
        }
    assert report == expected


async def test_ipc_objects_do_not_outlive_a_reset(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    """System V objects and POSIX message queues would carry state past the reset."""
    code = ATTEMPT + (
        "import sys\n"
        "librt = ctypes.CDLL('librt.so.1', use_errno=True)\n"
        "create = sys.argv[1] == 'create'\n"
        "flags = 0o1000 | 0o600 if create else 0  # IPC_CREAT\n"
        "out = {\n"
        "  'shm': attempt(lambda: check(libc.shmget(0x5EED, 4096 if create else 0, flags))),\n"
        "  'sem': attempt(lambda: check(libc.semget(0x5EEE, 1 if create else 0, flags))),\n"
        "  'msg': attempt(lambda: check(libc.msgget(0x5EEF, flags))),\n"
        "  'mq': attempt(lambda: check(librt.mq_open(b'/planted',\n"
        "                                            os.O_CREAT | os.O_RDWR if create\n"
        "                                            else os.O_RDONLY, 0o600, None))),\n"
        "}\n"
        "print(json.dumps(out))\n"
    )
    reports = []
    async with pool.lease(python_image, policy, TENANT) as lease:
        for phase in ("create", "find"):
            result = await lease.sandbox.exec(
                ["python3", "main.py", phase],
                limits=exec_limits(policy, None),
                env=BASE_ENV,
                files={"main.py": code.encode()},
            )
            assert result.status == ExecStatus.OK, result.stderr
            reports.append(json.loads(result.stdout))
            assert await lease.sandbox.reset() == []
    created, found = reports
    if gvisor(policy):
        # The reset could not see them there (no /proc/sysvipc, no RLIMIT_MSGQUEUE):
        # the runner's seccomp filter makes them unavailable.
        assert created == found == dict.fromkeys(("shm", "sem", "msg", "mq"), "ENOSYS")
    else:
        assert created == {"shm": "OK", "sem": "OK", "msg": "OK", "mq": "EMFILE"}
        assert found == dict.fromkeys(("shm", "sem", "msg", "mq"), "ENOENT")


async def test_previous_inputs_are_not_in_the_next_executions_memory(
    pool: Pool, python_image: str, policy: Policy
) -> None:
    """The pre-forked interpreter must not carry the runner's copy of earlier requests.

    The scanner never builds the whole needle (it would find itself): it looks
    for the first half and compares the bytes that follow with the second half.
    """
    secret = SECRET.encode() * 50
    async with pool.lease(python_image, policy, TENANT) as lease:
        planted = await lease.sandbox.exec(
            ["true"],  # the secret is not in the reply: only in the request
            limits=exec_limits(policy, None),
            env=BASE_ENV,
            stdin=secret,
            files={"expected.txt": secret},
        )
        assert planted.status == ExecStatus.OK
        assert planted.stdout == planted.stderr == b""
    halves = [(n[:12].encode(), n[12:].encode()) for n in (SECRET, SECRET_B64)]
    scan = (
        "import ctypes\n"
        f"halves = {halves!r}\n"
        "hits = [0] * len(halves)\n"
        "for line in open('/proc/self/maps').read().splitlines():\n"
        "    parts = line.split()\n"
        "    if not parts[1].startswith('r'):\n"
        "        continue\n"
        "    if len(parts) > 5 and parts[5] not in ('[heap]', '[stack]'):\n"
        "        continue  # files: the image's, not the runner's data\n"
        "    start, end = (int(x, 16) for x in parts[0].split('-'))\n"
        "    data = ctypes.string_at(start, end - start)\n"
        "    for i, (head, tail) in enumerate(halves):\n"
        "        at = data.find(head)\n"
        "        while at >= 0:\n"
        "            hits[i] += data[at + 12 : at + 12 + len(tail)] == tail\n"
        "            at = data.find(head, at + 1)\n"
        "    del data\n"
        "print(hits)\n"
    )
    result = await run(pool, python_image, policy, scan)
    assert result.status == ExecStatus.OK, result.stderr
    assert result.stdout == b"[0, 0]\n"
