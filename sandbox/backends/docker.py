"""Sandboxes as locked-down Docker containers, each with a persistent runner inside.

Every container gets the secure defaults of the security model: the runner
starts as root holding only SETUID, SETGID, KILL, DAC_OVERRIDE and FOWNER (to
drop to the untrusted uids, to kill them and to wipe what they wrote);
untrusted code runs as the policy's uid, hidden tests as its judge uid, both
with no capability at all (a ``user.root`` policy's commands: uid 0 under gVisor, see
:data:`ROOT_CAPABILITIES`); no-new-privileges, read-only root, size- and inode-capped
tmpfs for the writable paths, no network (an allowlist policy gets a network of
its own whose only other endpoint is the egress proxy: see :mod:`.network`),
memory with swap equal to memory,
CPU quota, pids limit, nofile/fsize/core ulimits, docker-init reaping zombies,
no log driver, and labels naming the owning service process so that leftovers
of a crashed service can be found and removed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

import docker
import docker.errors
from docker.types import LogConfig, Mount, Ulimit

from ..errors import ContainerLostError, EngineError, InvalidRequestError, NotFoundError
from ..host.engine import RUNTIME_RUNSC_ROOT, RUNTIME_RUNSC_ROOT_NET
from ..host.labels import (
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_POLICY,
    LABEL_POLICY_DIGEST,
    owner_alive,
    owner_label,
)
from ..policy import AllowRule, Policy
from ..results import ExecLimits, ExecResult, ExecStatus, ResourceUsage
from .base import JUDGE_DIR, WORKDIR, Backend, Sandbox
from .channel import RunnerChannel
from .network import (
    DEFAULT_EGRESS_NETWORK,
    DEFAULT_SANDBOX_SUBNETS,
    SANDBOX_SYSCTLS,
    AllowlistNetworks,
    SandboxNetwork,
)
from .oom import OomRecord, watch_oom

logger = logging.getLogger(__name__)

RUNNER_CAPABILITIES = ("SETUID", "SETGID", "KILL", "DAC_OVERRIDE", "FOWNER")
# What a root session's commands hold besides (Docker's defaults but NET_RAW, MKNOD and
# SETPCAP: no raw packets, no device nodes), capabilities of gVisor's kernel only.
ROOT_CAPABILITIES = ("CHOWN", "FSETID", "SETFCAP", "SYS_CHROOT", "NET_BIND_SERVICE", "AUDIT_WRITE")
RUNTIME_GVISOR_NETWORK = "runsc-net"  # gVisor with its own network stack (engine.py registers it)
# gVisor with the root file system writable in the sandbox's memory (root sessions).
RUNTIME_GVISOR_ROOT = {False: RUNTIME_RUNSC_ROOT, True: RUNTIME_RUNSC_ROOT_NET}
RUNNER_DIR = "/opt/sandbox"
TMP_DIR = "/tmp"
SHM_DIR = "/dev/shm"
# The runner's own socket (runc): a tmpfs only root may enter, reached by the service
# through the container's root in the host's /proc (see RunnerChannel.use_socket).
RUNNER_SOCKET_DIR = "/run/sandbox-runner"
RUNNER_SOCKET = f"{RUNNER_SOCKET_DIR}/channel.sock"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# How the runner starts, whatever the image says: with no environment but these (an
# image's ENV, e.g. LD_PRELOAD or PYTHONPATH with a sitecustomize, never reaches it) and
# the interpreter told to ignore PYTHON* variables (-E) and the user site (-s). Its
# directory is the working directory, which the build replaces whole.
# HOME as the engine sets it for root: without it, start-up code the zygote runs once
# (site's expanduser) imports pwd, which every fast-path child would then show.
RUNNER_START = ("/usr/bin/env", "-i", f"PATH={SYSTEM_PATH}", "LANG=C.UTF-8", "HOME=/root")
RUNNER_PYTHON = ("python3", "-E", "-s", "-m", "runner")
# No HEALTHCHECK of the image runs: it would run as root in every sandbox.
NO_HEALTHCHECK = {"test": ["NONE"]}
MiB = 1 << 20
RUNNER_NOFILE = 4096
# Under gVisor the host's pids cgroup holds the sandbox kernel (the Sentry, its gofer
# and, on the ptrace platform, stub processes with a thread per Sentry thread that ran
# in them), not the sandbox's processes: ~50 host tasks at rest, ~5 per sandboxed
# process, up to ~30 per process under a fork bomb. At a host limit of policy.pids the
# Sentry fails to create a thread and dies, taking the container down as an infra
# error. So the policy's limit is enforced inside, by the sandbox kernel (RLIMIT_NPROC
# per untrusted uid, see the runner's --nproc), and the host limit is a backstop sized
# for two full roles; the memory limit (which kernel stacks count against) still
# bounds the host tasks a sandbox can hold, and usually ends a bomb first.
RUNSC_HOST_TASKS_BASE = 256
RUNSC_HOST_TASKS_PER_PROCESS = 32
RUNSC_RUNNER_PROCESSES = 8  # init, runner, zygote, spares

# Under gVisor the host's memory cgroup holds the sandbox kernel too (the Sentry's own
# heap, the gofer, page tables of every address space, host page cache it reads through):
# tens of MB at rest, more per process. At a host limit of policy.memory_mb a program
# gets much less than that, and reaching it makes the host's OOM killer take the whole
# sandbox, which Docker reports only now and then (its oom event races the removal of
# the dead container). So the policy's limit is enforced inside, on the sandbox
# kernel's own count (the runner's --memory), and the host limit is a backstop with
# headroom for that kernel and for what a program allocates between two checks.
RUNSC_MEMORY_OVERHEAD = 160 * MiB
RUNSC_MEMORY_OVERHEAD_SHARE = 0.25

# How long the runner may take to answer beyond the execution's own wall limit.
REPLY_MARGIN_S = 10.0
# What one case of exec_cases may take beyond its wall limit (its set-up, its collection).
CASE_MARGIN_S = 1.0
# The most output (stdout and stderr caps) one exec_cases request may bring back: its cases
# go in as many requests as that takes (4 cases a request with the default 1 MB caps), so
# that the runner's reply, in the sandbox's memory, stays within a few times one exec's.
CASES_REPLY_BYTES = 8 << 20
HELLO_TIMEOUT_S = 30.0
RESET_TIMEOUT_S = 15.0


def _tmpfs_options(size_mb: int, inodes: int, mode: str, uid: int = 0, gid: int = 0) -> str:
    # Docker mounts tmpfs noexec unless told otherwise; compiled programs run from here.
    return (
        f"rw,exec,nosuid,nodev,size={size_mb}m,nr_inodes={inodes},uid={uid},gid={gid},mode={mode}"
    )


def host_pids_limit(policy: Policy) -> int:
    """The container's pids cgroup limit: the policy's under runc, a backstop under gVisor."""
    pids = policy.resources.pids
    if policy.runtime != "runsc":
        return pids
    processes = 2 * pids + RUNSC_RUNNER_PROCESSES  # the candidate's, the judge's, ours
    return RUNSC_HOST_TASKS_BASE + RUNSC_HOST_TASKS_PER_PROCESS * processes


def host_memory_limit(policy: Policy) -> int:
    """The container's memory cgroup limit: the policy's under runc, with headroom under gVisor."""
    memory = policy.resources.memory_mb * MiB
    if policy.runtime != "runsc":
        return memory
    return memory + RUNSC_MEMORY_OVERHEAD + int(memory * RUNSC_MEMORY_OVERHEAD_SHARE)


def container_settings(
    image: str, policy: Policy, owner: str, network: SandboxNetwork | None = None
) -> dict[str, Any]:
    """The create-container arguments for ``policy``; pure, so tests can inspect it.

    An allowlist policy needs ``network``: the sandbox's own internal network,
    whose only other endpoint is the egress proxy (see :mod:`.network`).
    """
    if (policy.network.mode == "allowlist") != (network is not None):
        raise ValueError(
            f"policy {policy.name!r} has network mode {policy.network.mode!r}: a sandbox "
            "network is needed exactly for allowlist policies"
        )
    res, fs, user = policy.resources, policy.filesystem, policy.user
    tmpfs = {
        WORKDIR: _tmpfs_options(
            fs.workspace.size_mb, fs.workspace.inodes, "0755", user.uid, user.gid
        ),
        TMP_DIR: _tmpfs_options(fs.tmp.size_mb, fs.tmp.inodes, "1777"),
        JUDGE_DIR: _tmpfs_options(
            fs.workspace.size_mb, fs.workspace.inodes, "0700", user.judge_uid, user.judge_gid
        ),
    }
    for extra in fs.extra_tmpfs:
        tmpfs[extra.path] = _tmpfs_options(extra.size_mb, extra.inodes, "0755", user.uid, user.gid)
    writable = [f"{WORKDIR}:755", f"{TMP_DIR}:1777", f"{SHM_DIR}:1777", f"{JUDGE_DIR}:700"]
    writable += [f"{extra.path}:755" for extra in fs.extra_tmpfs]
    command = [*RUNNER_START, *RUNNER_PYTHON, "--uid", str(user.uid), "--gid", str(user.gid)]
    command += ["--judge-uid", str(user.judge_uid), "--judge-gid", str(user.judge_gid)]
    for spec in writable:
        command += ["--dir", spec]
    if policy.runtime == "runsc":
        command += ["--runtime", "runsc", "--nproc", str(res.pids)]
        command += ["--memory", str(res.memory_mb * MiB)]
        if user.root:
            command += ["--root", "on"]
    else:
        command += ["--socket", RUNNER_SOCKET]
        tmpfs[RUNNER_SOCKET_DIR] = _tmpfs_options(1, 16, "0700")
    memory = host_memory_limit(policy)
    host_config = {
        # A root session's writes outside the tmpfs mounts land in gVisor's memory.
        "read_only": fs.read_only_root and not user.root,
        "cap_drop": ["ALL"],
        "cap_add": [*RUNNER_CAPABILITIES, *(ROOT_CAPABILITIES if user.root else ())],
        "security_opt": ["no-new-privileges:true"],
        "network_mode": "none",
        "ipc_mode": "private",
        "mem_limit": memory,
        "memswap_limit": memory + res.swap_mb * MiB,
        "nano_cpus": int(res.cpus * 1e9),
        "pids_limit": host_pids_limit(policy),
        "ulimits": [
            # Untrusted code gets open_files for both; the runner may raise its own
            # soft limit up to this hard one (descriptors in flight between it and
            # the zygote count against it).
            Ulimit(name="nofile", soft=res.open_files, hard=max(res.open_files, RUNNER_NOFILE)),
            Ulimit(name="fsize", soft=res.file_size_mb * MiB, hard=res.file_size_mb * MiB),
            Ulimit(name="core", soft=0, hard=0),
        ],
        "tmpfs": tmpfs,
        "shm_size": fs.shm_mb * MiB,
        "mounts": [
            Mount(target=m.target, source=m.source, type="bind", read_only=True) for m in fs.mounts
        ],
        "init": True,
        "log_config": LogConfig(type="none"),
        "auto_remove": True,
        "runtime": RUNTIME_GVISOR_ROOT[network is not None] if user.root else policy.runtime,
    }
    environment = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}
    networking: dict[str, Any] = {}
    if network is not None:
        host_config["network_mode"] = network.name
        host_config["dns"] = [str(network.proxy_ip)]  # the proxy's REFUSED-only DNS responder
        host_config["sysctls"] = dict(SANDBOX_SYSCTLS)
        if policy.runtime == "runsc" and not user.root:
            host_config["runtime"] = RUNTIME_GVISOR_NETWORK
        environment.update(network.env)
        networking = {
            "network_disabled": False,
            "networking_config": {
                "EndpointsConfig": {
                    network.name: {"IPAMConfig": {"IPv4Address": str(network.sandbox_ip)}}
                }
            },
        }
    return {
        "image": image,
        "command": command,
        "working_dir": RUNNER_DIR,
        "user": "0:0",
        "hostname": "sandbox",
        "environment": environment,
        "healthcheck": NO_HEALTHCHECK,
        "stop_signal": "SIGKILL",
        "stdin_open": True,
        "detach": False,  # makes docker-py set StdinOnce: stdin closes when we detach
        "network_disabled": True,
        "labels": {
            LABEL_MANAGED: "1",
            LABEL_OWNER: owner,
            LABEL_POLICY: policy.name,
            LABEL_POLICY_DIGEST: policy.digest,
        },
        "host_config": host_config,
        **networking,
    }


def _engine_socket() -> str:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    parsed = urlparse(host)
    if parsed.scheme != "unix":
        raise EngineError(
            f"DOCKER_HOST={host}: the runner channel needs the engine's unix socket; "
            "run the service on the Docker host"
        )
    return parsed.path


class DockerSandbox(Sandbox):
    """A running container and the channel to its runner."""

    def __init__(
        self,
        backend: DockerBackend,
        container_id: str,
        image: str,
        policy: Policy,
        network: SandboxNetwork | None = None,
    ) -> None:
        self.id = container_id
        self.image = image
        self.policy = policy
        self.network = network
        self._backend = backend
        self._channel: RunnerChannel | None = None
        self._closed = False
        self._reset_pending = False
        self._oom_record: OomRecord | None = None

    @property
    def alive(self) -> bool:
        if self.network is not None and not self._backend.networks.proxy_alive(
            self.network.generation
        ):
            return False  # its only way out is gone: retire it
        return not self._closed and self._channel is not None and not self._channel.closed

    @property
    def transport(self) -> str:
        """How requests reach the runner: ``"socket"`` or ``"attach"`` (see :mod:`.channel`)."""
        return self._channel.transport if self._channel is not None else "attach"

    @property
    def extra_env(self) -> dict[str, str]:
        """Environment every program here gets on top of the caller's (the egress proxy)."""
        return self.network.env if self.network is not None else {}

    async def _call(
        self, message: dict[str, Any], timeout: float, *, follow_up: bool = False
    ) -> dict[str, Any]:
        if self._channel is None or self._closed:
            raise ContainerLostError(f"sandbox {self.id[:12]} is closed")
        reply = await self._channel.call(message, timeout, follow_up=follow_up)
        if not reply.get("ok"):
            raise ContainerLostError(f"runner in {self.id[:12]} failed: {reply.get('error')}")
        return reply

    async def exec(
        self,
        argv: Sequence[str],
        *,
        limits: ExecLimits,
        stdin: bytes = b"",
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, bytes] | None = None,
        fetch: Sequence[str] = (),
        keep_processes: bool = False,
        reset_after: bool = False,
        peer: Mapping[str, Any] | None = None,
        role: str = "sandbox",
        channel: bool = False,
    ) -> ExecResult:
        message = self._exec_message(argv, limits, cwd, env, files, reset_after, role)
        message.update(stdin=base64.b64encode(stdin).decode(), fetch=list(fetch))
        message["keep_processes"] = keep_processes
        if channel:
            message["channel"] = True
        if peer is not None:
            message["peer"] = {
                "argv": list(peer["argv"]),
                "cwd": peer.get("cwd", WORKDIR),
                "env": {**(peer.get("env") or {}), **self.extra_env},
                "files": _wire_files(peer.get("files")),
            }
        reply = await self._exec_call(message, limits.wall_s, reset_after)
        return reply if isinstance(reply, ExecResult) else _result_from_reply(reply, argv)

    async def exec_cases(
        self,
        argv: Sequence[str],
        stdins: Sequence[bytes],
        *,
        limits: ExecLimits,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, bytes] | None = None,
        reset_after: bool = False,
        stop_on_failure: bool = False,
    ) -> list[ExecResult]:
        # In requests of at most CASES_REPLY_BYTES of output: what one reply may hold.
        size = max(1, CASES_REPLY_BYTES // (limits.stdout_bytes + limits.stderr_bytes))
        results: list[ExecResult] = []
        while len(results) < len(stdins):
            first = len(results)
            group = stdins[first : first + size]
            last = first + len(group) == len(stdins)
            message = self._exec_message(
                argv, limits, cwd, env, None if first else files, reset_after and last, "sandbox"
            )
            message["stdins"] = [base64.b64encode(stdin).decode() for stdin in group]
            message["stop_on_failure"] = stop_on_failure
            wall_s = (limits.wall_s + CASE_MARGIN_S) * len(group)
            reply = await self._exec_call(message, wall_s, reset_after and last)
            if isinstance(reply, ExecResult):  # which case it was, the lost container cannot say
                return results + [reply] * (len(stdins) - first)
            part = [_result_from_reply(case, argv) for case in reply["cases"]]
            stopped = stop_on_failure and bool(part) and part[-1].status is not ExecStatus.OK
            if len(part) != len(group) and not stopped:
                raise ContainerLostError(
                    f"runner in {self.id[:12]} answered {len(part)} of {len(group)} cases"
                )
            results += part
            if stopped:
                break
        return results

    def _exec_message(
        self,
        argv: Sequence[str],
        limits: ExecLimits,
        cwd: str,
        env: Mapping[str, str] | None,
        files: Mapping[str, bytes] | None,
        reset_after: bool,
        role: str,
    ) -> dict[str, Any]:
        """The runner's ``exec`` request, short of what only :meth:`exec` sends."""
        return {
            "role": role,
            "op": "exec",
            "argv": list(argv),
            "cwd": cwd,
            "env": {**(env or {}), **self.extra_env},
            "files": _wire_files(files),
            "limits": {
                "wall_s": limits.wall_s,
                "cpu_s": limits.cpu_s,
                "stdout_bytes": limits.stdout_bytes,
                "stderr_bytes": limits.stderr_bytes,
                "nofile": limits.nofile,
                "fsize_bytes": limits.fsize_bytes,
                **({"memory_bytes": limits.memory_bytes} if limits.memory_bytes else {}),
            },
            "reset_after": reset_after,
        }

    async def _exec_call(
        self, message: dict[str, Any], wall_s: float, reset_after: bool
    ) -> dict[str, Any] | ExecResult:
        """The runner's reply to an ``exec``, or the result of a container the OOM killer took."""
        try:
            reply = await self._call(message, wall_s + REPLY_MARGIN_S, follow_up=reset_after)
        except ContainerLostError:
            # Under gVisor the whole sandbox is one process to the host's OOM killer:
            # a program past the runner's check (a fork bomb outrunning it) takes the
            # container with it. That is the code's verdict.
            if await self.oom_killed():
                return ExecResult(status=ExecStatus.MEMORY_LIMIT, reason="container_oom")
            raise
        self._reset_pending = reset_after
        return reply

    async def oom_killed(self) -> bool:
        """Whether the host's OOM killer struck this container: the kernel's record of its
        memory cgroup where we hold one (gVisor, cgroup v1), else Docker's oom event."""
        if self._oom_record is not None:
            return await self._oom_record.oom_killed()
        return await self._backend.oom_killed(self.id)

    async def reset(self) -> list[str]:
        if self._reset_pending and self._channel is not None:
            self._reset_pending = False
            reply = await self._channel.follow_up(RESET_TIMEOUT_S)
            if not reply.get("ok"):
                return [f"reset failed: {reply.get('error')}"]
        else:
            reply = await self._call({"op": "reset"}, RESET_TIMEOUT_S)
        problems: list[str] = reply.get("problems", [])
        return problems

    async def ping(self) -> bool:
        if not self.alive:
            return False
        try:
            await self._call({"op": "ping"}, 5.0)
        except Exception:
            return False
        return True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._oom_record is not None:
            self._oom_record.close()
        if self._channel is not None:
            await self._channel.close()
        await self._backend.remove_container(self.id)
        if self.network is not None:
            await self._backend.networks.release(self.network)

    async def start(self) -> None:
        """Attach to the created container, start it and wait for its runner's hello."""
        self._channel = await RunnerChannel.attach(
            self._backend.socket_path, self._backend.api_version, self.id
        )
        await self._backend.start_container(self.id)
        if self.policy.runtime == "runsc":
            self._oom_record = await self._backend.watch_oom(self.id)
            reply = await self._call({"op": "hello"}, HELLO_TIMEOUT_S)
        else:
            reply, pid = await asyncio.gather(
                self._call({"op": "hello"}, HELLO_TIMEOUT_S), self._backend.container_pid(self.id)
            )
            if reply.get("socket") and pid is not None:
                # The container's root as the host sees it: the socket's directory is
                # root's alone in there, so only the runner can have made what is found.
                await self._channel.use_socket(f"/proc/{pid}/root{reply['socket']}")
        logger.debug("sandbox %s ready (%s): %s", self.id[:12], self.transport, reply)


def _wire_files(files: Mapping[str, bytes] | None) -> list[dict[str, str]]:
    return [
        {"path": path, "data": base64.b64encode(data).decode()}
        for path, data in (files or {}).items()
    ]


def _result_from_reply(reply: dict[str, Any], argv: Sequence[str]) -> ExecResult:
    status = reply["status"]
    if status == "setup_error":
        failure = reply.get("setup_error") or {}
        if failure.get("kind") == "not_found":
            raise NotFoundError(
                f"{argv[0]!r} is not installed in this sandbox image: {failure.get('error')}"
            )
        if failure.get("kind") == "refused":  # the request's cwd, a file, the program
            raise InvalidRequestError(str(failure.get("error")).removeprefix("RequestRefused: "))
        raise ContainerLostError(f"could not start {argv[0]!r}: {failure.get('error')}")
    files: dict[str, bytes] = {}
    file_errors: dict[str, str] = {}
    for path, entry in (reply.get("files") or {}).items():
        if "data" in entry:
            files[path] = base64.b64decode(entry["data"])
        else:
            file_errors[path] = entry.get("error", "unreadable")
    return ExecResult(
        status=ExecStatus(status),
        exit_code=reply.get("exit_code"),
        signal=reply.get("signal"),
        stdout=base64.b64decode(reply["stdout"]),
        stderr=base64.b64decode(reply["stderr"]),
        stdout_truncated=reply["stdout_truncated"],
        stderr_truncated=reply["stderr_truncated"],
        usage=ResourceUsage(
            wall_s=reply["wall_s"],
            cpu_s=reply["cpu_s"],
            peak_memory_bytes=reply.get("peak_memory_bytes"),
        ),
        reason=reply.get("reason"),
        files=files,
        file_errors=file_errors,
        oom_killed=bool(reply.get("oom_killed")),
        peer=_peer_from_reply(reply.get("peer")),
        channel=reply.get("channel"),
    )


def _peer_from_reply(peer: dict[str, Any] | None) -> dict[str, Any] | None:
    if peer is None:
        return None
    return {
        **peer,
        "stdout": base64.b64decode(peer.get("stdout", "")),
        "stderr": base64.b64decode(peer.get("stderr", "")),
    }


class OomWatcher:
    """Follows the engine's ``oom`` events for our containers, in a daemon thread."""

    MAX_REMEMBERED = 4096

    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client
        self._seen: dict[str, float] = {}
        self._stream: Any = None
        self._thread: threading.Thread | None = None
        self._stopped = False

    def start(self) -> None:
        """Begin following events (before any container can be OOM-killed)."""
        if self._thread is None and not self._stopped:
            self._thread = threading.Thread(target=self._follow, name="oom-events", daemon=True)
            self._thread.start()

    def _follow(self) -> None:
        filters = {"type": "container", "event": "oom", "label": f"{LABEL_MANAGED}=1"}
        try:
            self._stream = self._client.events(decode=True, filters=filters)
            for event in self._stream:
                self._seen[str(event.get("id", ""))] = time.monotonic()
                if len(self._seen) > self.MAX_REMEMBERED:
                    self._seen.pop(next(iter(self._seen)))
        except Exception as exc:  # the stream ends when the engine goes or we stop
            if not self._stopped:
                logger.warning("lost the engine's event stream: %s", exc)

    async def seen(self, container_id: str, wait_s: float) -> bool:
        deadline = time.monotonic() + wait_s
        while container_id not in self._seen:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def stop(self) -> None:
        self._stopped = True
        if self._stream is not None:
            with contextlib.suppress(Exception):
                self._stream.close()


class DockerBackend(Backend):
    """Creates and removes sandbox containers on the local Docker engine."""

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        *,
        egress_network: str = DEFAULT_EGRESS_NETWORK,
        egress_image: str | None = None,
        sandbox_subnets: str = DEFAULT_SANDBOX_SUBNETS,
    ) -> None:
        """``egress_network``: where the egress proxy of allowlist sandboxes reaches out
        from; ``egress_image``: its image (default: the python image); ``sandbox_subnets``:
        the range the per-sandbox networks are carved from."""
        try:
            self.client = client or docker.from_env()
            self.api_version = self.client.api.api_version
        except docker.errors.DockerException as exc:
            raise EngineError(
                f"cannot reach the Docker engine ({exc}); run `sandbox engine ensure`"
            ) from exc
        self.socket_path = _engine_socket()
        self.owner = owner_label()
        self._live: set[str] = set()
        self._creating: set[asyncio.Future[str]] = set()
        self._ooms = OomWatcher(self.client)
        self._ooms.start()
        self.networks = AllowlistNetworks(
            self.client,
            self.socket_path,
            self.api_version,
            egress_network=egress_network,
            egress_image=egress_image,
            sandbox_subnets=sandbox_subnets,
        )

    def _labels(self) -> dict[str, str]:
        return {LABEL_MANAGED: "1", LABEL_OWNER: self.owner}

    def build_networks(
        self, image: str
    ) -> Callable[
        [Sequence[AllowRule]], contextlib.AbstractContextManager[tuple[str, dict[str, str]]]
    ]:
        """For image builds run in other threads (``build_network: allowlist``): each call
        with allow rules is a network of one build's own behind this backend's egress proxy
        (``image``: the proxy's if none runs yet). Call it on the backend's event loop."""
        loop = asyncio.get_running_loop()
        labels = self._labels()
        return lambda rules: self.networks.build_network(loop, image, rules, labels)

    async def oom_killed(self, container_id: str, *, wait_s: float = 2.0) -> bool:
        """Whether the engine reported an OOM kill in this container (waits for the event)."""
        return await self._ooms.seen(container_id, wait_s)

    async def watch_oom(self, container_id: str) -> OomRecord | None:
        """The kernel's OOM record of a started container's memory cgroup, where it can be had."""

        pid = await self.container_pid(container_id)
        return None if pid is None else await asyncio.to_thread(watch_oom, pid)

    async def container_pid(self, container_id: str) -> int | None:
        """The host pid of a started container's first process (None: not known)."""

        def _pid() -> int | None:
            try:
                pid = int(self.client.api.inspect_container(container_id)["State"]["Pid"])
            except (docker.errors.APIError, KeyError, TypeError, ValueError):
                return None
            return pid if pid > 0 else None

        return await asyncio.to_thread(_pid)

    async def create(self, image: str, policy: Policy) -> DockerSandbox:
        network = None
        if policy.network.mode == "allowlist":
            network = await self.networks.attach(image, policy, self._labels())
        try:
            container_id = await self._create_container(image, policy, network)
        except BaseException:
            if network is not None:
                await self.networks.release(network)
            raise
        sandbox = DockerSandbox(self, container_id, image, policy, network)
        try:
            await sandbox.start()
        except BaseException:
            await sandbox.close()
            raise
        return sandbox

    async def _create_container(
        self, image: str, policy: Policy, network: SandboxNetwork | None
    ) -> str:
        settings = container_settings(image, policy, self.owner, network)
        host_config = self.client.api.create_host_config(**settings.pop("host_config"))

        def _create() -> str:
            try:
                created = self.client.api.create_container(**settings, host_config=host_config)
            except docker.errors.ImageNotFound as exc:
                raise NotFoundError(
                    f"image {image} is not built; run `sandbox images build`"
                ) from exc
            except docker.errors.APIError as exc:
                raise EngineError(f"cannot create a container from {image}: {exc}") from exc
            container_id = str(created["Id"])
            self._live.add(container_id)  # here, so a cancelled caller cannot lose track of it
            return container_id

        creating = asyncio.ensure_future(asyncio.to_thread(_create))
        self._creating.add(creating)
        creating.add_done_callback(self._creating.discard)
        return await asyncio.shield(creating)

    async def start_container(self, container_id: str) -> None:
        try:
            await asyncio.to_thread(self.client.api.start, container_id)
        except docker.errors.APIError as exc:
            raise EngineError(f"cannot start container {container_id[:12]}: {exc}") from exc

    async def remove_container(self, container_id: str) -> None:
        """Force-remove a container; a container already gone is fine."""
        self._live.discard(container_id)

        def _remove() -> None:
            with contextlib.suppress(docker.errors.NotFound):
                try:
                    self.client.api.remove_container(container_id, force=True)
                except docker.errors.APIError as exc:
                    if exc.status_code != 409:  # 409: removal already in progress
                        raise

        try:
            await asyncio.to_thread(_remove)
        except docker.errors.APIError as exc:
            logger.warning("could not remove container %s: %s", container_id[:12], exc)

    def _managed(self) -> list[dict[str, Any]]:
        containers: list[dict[str, Any]] = self.client.api.containers(
            all=True, filters={"label": f"{LABEL_MANAGED}=1"}
        )
        return containers

    async def remove_orphans(self) -> int:
        containers = await asyncio.to_thread(self._managed)
        orphans = [
            c["Id"] for c in containers if not owner_alive(c.get("Labels", {}).get(LABEL_OWNER, ""))
        ]
        await asyncio.gather(*(self.remove_container(cid) for cid in orphans))
        if orphans:
            logger.info("removed %d containers left by an earlier run", len(orphans))
        # Networks after containers: an orphan network's endpoints were those containers.
        networks = await self.networks.remove_orphans(
            f"{LABEL_MANAGED}=1", LABEL_OWNER, owner_alive
        )
        return len(orphans) + networks

    async def close(self) -> None:
        self._ooms.stop()
        # Creations already sent to the engine finish first, so none is left behind.
        await asyncio.gather(*self._creating, return_exceptions=True)
        await asyncio.gather(*(self.remove_container(cid) for cid in list(self._live)))
        await self.networks.close()  # the proxy, then every sandbox network left
