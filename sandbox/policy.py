"""Security policies: the frozen model, the YAML loader, validation and lint.

A policy is a YAML file (``policies/<name>.yaml``) that fixes what one sandbox
may use: resources, filesystem, network, runtime, uid/gid, environment and
pool sizing. Loading is strict, and nothing falls back to a permissive default:

* the file is plain YAML data: no tags, anchors, aliases, directives, merge
  keys or duplicate keys, one document, a mapping at the top, at most
  :data:`MAX_POLICY_BYTES`;
* every key is known (``extra="forbid"``), every value has exactly the right
  type (no ``"512"`` for an int) and lies within the bounds below;
* dangerous settings (privileged, capabilities, host namespaces, devices,
  writable root, root uid, host network, the Docker socket, ...) are refused
  with a message saying why;
* host mounts are read-only, must sit under a root listed in
  ``SANDBOX_MOUNT_ALLOWLIST``, may not be, contain or follow a link to a
  system path, and may have no other filesystem mounted below them (a
  read-only bind mount is not recursive on Docker 20.10).

Every refusal is a :class:`~sandbox.errors.PolicyError` that names the file,
the dotted key and what to change. A request may only *lower* limits, through
:class:`LimitOverrides` and :func:`effective_limits`.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import ipaddress
import json
import logging
import os
import posixpath
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal, NoReturn, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sandbox.errors import LimitError, PolicyError

__all__ = [
    "MOUNT_ALLOWLIST_ENV",
    "Env",
    "ExtraTmpfs",
    "Filesystem",
    "LimitOverrides",
    "Mount",
    "Network",
    "Policy",
    "PoolSettings",
    "Resources",
    "TmpfsSpec",
    "User",
    "effective_limits",
    "lint_policy",
    "load_policy",
    "load_policy_dir",
    "load_yaml_mapping",
    "parse_policy",
]

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------
# Limits. The README table in policies/README.md is derived from these; a unit test
# checks that the two agree.
# --------------------------------------------------------------------------------------

MOUNT_ALLOWLIST_ENV: Final = "SANDBOX_MOUNT_ALLOWLIST"
"""Environment variable: ``os.pathsep``-separated host roots that mounts may come from."""

MAX_POLICY_BYTES: Final = 64 * 1024
MAX_EXTENDS_DEPTH: Final = 8
MAX_YAML_NESTING: Final = 16
POLICY_SUFFIXES: Final = (".yaml", ".yml")
MAX_POLICY_NAME_LEN: Final = 64
POLICY_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

MIN_CPUS: Final = 0.05
MAX_CPUS: Final = 64.0
DEFAULT_CPUS: Final = 1.0
MIN_MEMORY_MB: Final = 16
MAX_MEMORY_MB: Final = 65536
DEFAULT_MEMORY_MB: Final = 512
SWAP_MB: Final = 0  # the only accepted value: swap stays off
MIN_PIDS: Final = 8
MAX_PIDS: Final = 4096
DEFAULT_PIDS: Final = 128
MIN_TIME_S: Final = 0.1
MAX_TIME_S: Final = 3600.0
DEFAULT_WALL_TIME_S: Final = 10.0
DEFAULT_CPU_TIME_S: Final = 10.0
DEFAULT_COMPILE_TIME_S: Final = 30.0
MIN_OUTPUT_BYTES: Final = 1
MAX_OUTPUT_BYTES: Final = 64 * 1024 * 1024
DEFAULT_OUTPUT_BYTES: Final = 1024 * 1024
MIN_OPEN_FILES: Final = 16
MAX_OPEN_FILES: Final = 65536
DEFAULT_OPEN_FILES: Final = 256
MIN_FILE_SIZE_MB: Final = 1
MAX_FILE_SIZE_MB: Final = 4096
DEFAULT_FILE_SIZE_MB: Final = 64

MIN_TMPFS_MB: Final = 1
MAX_TMPFS_MB: Final = 8192
MIN_TMPFS_INODES: Final = 16
MAX_TMPFS_INODES: Final = 4_000_000
DEFAULT_TMPFS_MB: Final = 64
DEFAULT_TMPFS_INODES: Final = 8192
MIN_SHM_MB: Final = 1
MAX_SHM_MB: Final = 4096
DEFAULT_SHM_MB: Final = 16
MAX_EXTRA_TMPFS: Final = 8
MAX_MOUNTS: Final = 16
MAX_PATH_LEN: Final = 4096

MIN_UID: Final = 1000
MAX_UID: Final = 2**31 - 2
DEFAULT_UID: Final = 10001
DEFAULT_GID: Final = 10001
DEFAULT_JUDGE_UID: Final = 10002
DEFAULT_JUDGE_GID: Final = 10002

MAX_ENV_VARS: Final = 256
MAX_ENV_NAME_LEN: Final = 128
MAX_ENV_VALUE_LEN: Final = 4096
ENV_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

MIN_POOL_WARM: Final = 0
MAX_POOL_WARM: Final = 64
DEFAULT_POOL_WARM: Final = 2
MIN_POOL_MAX: Final = 1
MAX_POOL_MAX: Final = 256
DEFAULT_POOL_MAX: Final = 8
MIN_MAX_USES: Final = 1
MAX_MAX_USES: Final = 100_000
DEFAULT_MAX_USES: Final = 100
MIN_SESSION_TTL_S: Final = 5.0
MAX_SESSION_TTL_S: Final = 86400.0
DEFAULT_SESSION_TTL_S: Final = 600.0

NETWORK_MODES: Final = ("none", "allowlist")
MAX_ALLOW_RULES: Final = 256
HOSTNAME_RE: Final = re.compile(
    r"(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
RUNTIMES: Final = ("runc", "runsc")

WORKSPACE_PATH: Final = "/workspace"
TMP_PATH: Final = "/tmp"
RUNNER_PATH: Final = "/opt/sandbox"
RESERVED_TARGETS: Final = (WORKSPACE_PATH, TMP_PATH, RUNNER_PATH)
"""Container paths the platform owns: nothing may be mounted at, above or below them."""
FORBIDDEN_TARGET_ROOTS: Final = ("/proc", "/sys", "/dev")
DOCKER_SOCKET_PATHS: Final = ("/var/run/docker.sock", "/run/docker.sock")
SYSTEM_PATHS: Final = (
    "/",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/root",
    "/run",
    "/var/run",
    "/var/lib/docker",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/var",
    "/home",
)
"""Host paths that are never a mount source, nor is any ancestor of them."""
NO_DESCENDANT_SOURCES: Final = (
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/root",
    "/run",
    "/var/run",
    "/var/lib/docker",
)
"""Host paths whose whole subtree is refused as a mount source."""
MOUNTINFO: Final = "/proc/self/mountinfo"
"""Where the mount points below a mount source are looked up."""

PROTECTED_ENV_NAMES: Final = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "NODE_OPTIONS",
        "PERL5OPT",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "RUBYOPT",
    }
)
"""Interpreter start-up hooks a request may never pass through (``env.allow``)."""

# Lint thresholds (warnings only).
LINT_WALL_CPU_RATIO: Final = 4.0
LINT_PYTHON_MIN_MEMORY_MB: Final = 64
LINT_MIN_PIDS: Final = 32

# --------------------------------------------------------------------------------------
# Dangerous keys: refused wherever they appear, with a reason instead of "unknown key".
# --------------------------------------------------------------------------------------

_CAPS = "capabilities are always all dropped and can never be added"
_SECOPT = (
    "seccomp, AppArmor and no-new-privileges are fixed by the platform and cannot be "
    "loosened from a policy"
)
_NAMESPACE = (
    "sharing a host namespace (pid, ipc, uts, user, cgroup, network) lets sandboxed code "
    "see or signal host processes"
)
_DANGEROUS_KEYS: Final[dict[str, str]] = {
    "privileged": "a privileged container gets every capability and every host device",
    "capadd": _CAPS,
    "capabilities": _CAPS,
    "addcapabilities": _CAPS,
    "securityopt": _SECOPT,
    "seccomp": _SECOPT,
    "apparmor": _SECOPT,
    "selinux": _SECOPT,
    "nonewprivileges": _SECOPT,
    "pid": _NAMESPACE,
    "pidmode": _NAMESPACE,
    "ipc": _NAMESPACE,
    "ipcmode": _NAMESPACE,
    "uts": _NAMESPACE,
    "utsmode": _NAMESPACE,
    "userns": _NAMESPACE,
    "usernsmode": _NAMESPACE,
    "cgroupns": _NAMESPACE,
    "cgroupnsmode": _NAMESPACE,
    "networkmode": _NAMESPACE + "; the network is chosen by network.mode ('none' or 'allowlist')",
    "hostnetwork": _NAMESPACE,
    "hostpid": _NAMESPACE,
    "hostipc": _NAMESPACE,
    "devices": "host devices are never passed into a sandbox",
    "device": "host devices are never passed into a sandbox",
    "sysctls": "kernel parameters (sysctls) cannot be changed from a policy",
    "volumes": "host paths are mounted only through filesystem.mounts (read-only, allowlisted)",
    "binds": "host paths are mounted only through filesystem.mounts (read-only, allowlisted)",
    "volumesfrom": "host paths are mounted only through filesystem.mounts (read-only, allowlisted)",
    "dockersocket": "the Docker socket is root on the host and is never reachable from a sandbox",
    "dockersock": "the Docker socket is root on the host and is never reachable from a sandbox",
}


def _normalise_key(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")


# --------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------

_KeyPath = tuple[str | int, ...]


def _dotted(path: Sequence[Any]) -> str:
    """``("filesystem", "mounts", 0, "source")`` -> ``filesystem.mounts[0].source``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _show(value: Any) -> str:
    """A short, YAML-flavoured rendering of a value for messages."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value))
    elif isinstance(value, int | float):
        text = str(value)
    else:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _KeyedValueError(ValueError):
    """A validator error that points below the field it was raised for."""

    def __init__(self, message: str, *suffix: str | int) -> None:
        super().__init__(message)
        self.suffix: _KeyPath = suffix


class _FrozenDict(dict[str, str]):
    """A read-only, hashable ``dict`` (keeps frozen models immutable and hashable)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("policy mappings are read-only")

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse


# --------------------------------------------------------------------------------------
# Path checks shared by mounts and extra tmpfs
# --------------------------------------------------------------------------------------


def _is_under(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or below it (both normalised, absolute)."""
    return path == root or root == "/" or path.startswith(root + "/")


def _check_abs_path(value: str, what: str) -> str:
    """Refuse anything but a plain, absolute, normalised POSIX path."""
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL byte; remove it")
    if len(value) > MAX_PATH_LEN:
        raise ValueError(f"{what} is {len(value)} characters long; the maximum is {MAX_PATH_LEN}")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ValueError(f"{what} {value!r} contains a control character; remove it")
    if value != value.strip():
        raise ValueError(f"{what} {value!r} has leading or trailing spaces; remove them")
    if not value.startswith("/"):
        raise ValueError(f"{what} {value!r} must be an absolute path (start with '/')")
    if ":" in value or "," in value:
        raise ValueError(
            f"{what} {value!r} contains ':' or ',', which Docker's mount syntax uses as "
            "separators; rename the directory"
        )
    if ".." in value.split("/"):
        raise ValueError(f"{what} {value!r} contains a '..' component; write the resolved path")
    if "//" in value:
        raise ValueError(f"{what} {value!r} contains '//'; write single slashes")
    normal = posixpath.normpath(value)
    if normal != value:
        raise ValueError(f"{what} {value!r} is not normalised; write {normal!r}")
    return value


def _check_container_target(value: str, what: str) -> str:
    """Where something may be mounted inside the container."""
    _check_abs_path(value, what)
    if value == "/":
        raise ValueError(f"{what} '/' would replace the container's root; choose a subdirectory")
    for root in FORBIDDEN_TARGET_ROOTS:
        if _is_under(value, root):
            raise ValueError(
                f"{what} {value!r} is under {root}, which belongs to the kernel and the "
                "runtime; choose another directory such as /data"
            )
    for reserved in RESERVED_TARGETS:
        if _is_under(value, reserved):
            raise ValueError(
                f"{what} {value!r} is {reserved} or inside it, which the platform manages; "
                "choose another directory such as /data"
            )
        if _is_under(reserved, value):
            raise ValueError(
                f"{what} {value!r} would hide {reserved}, which the platform manages; "
                "choose a directory that does not contain it"
            )
    return value


def _allowlist_roots(explicit: Sequence[str] | None) -> tuple[str, ...]:
    """The mount allowlist: the explicit value, else :data:`MOUNT_ALLOWLIST_ENV`."""
    if explicit is None:
        raw = os.environ.get(MOUNT_ALLOWLIST_ENV, "")
        entries = [e for e in raw.split(os.pathsep) if e.strip()]
        origin = f"{MOUNT_ALLOWLIST_ENV} entry"
    else:
        if isinstance(explicit, str):
            raise TypeError("mount_allowlist must be a sequence of paths, not one string")
        entries = [e for e in explicit if e.strip()]
        origin = "mount_allowlist entry"
    roots: list[str] = []
    for entry in entries:
        root = entry.strip()
        if not root.startswith("/"):
            raise ValueError(f"{origin} {root!r} is not an absolute path; fix the allowlist")
        root = posixpath.normpath(root)
        if root.startswith("//"):
            root = "/" + root.lstrip("/")
        if root == "/":
            raise ValueError(f"{origin} '/' would allow every host path; list specific directories")
        roots.append(root)
    return tuple(roots)


_MOUNTINFO_ESCAPE = re.compile(rb"\\([0-7]{3})")


def _mount_points() -> list[str]:
    """Every mount point of this process's mount namespace, as paths.

    The kernel writes a space, tab, newline or backslash in a mount point as an
    octal escape (``\\040``); those are decoded.
    """
    with open(MOUNTINFO, "rb") as handle:
        lines = handle.read().splitlines()
    points = []
    for line in lines:
        fields = line.split(b" ")
        if len(fields) > 4:
            point = _MOUNTINFO_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]), fields[4])
            points.append(os.fsdecode(point))
    return points


def _mounts_below(source: str) -> list[str]:
    """The mount points strictly below ``source`` (a resolved, absolute path)."""
    try:
        points = _mount_points()
    except OSError as exc:
        raise ValueError(
            f"mount source {source!r} cannot be checked for filesystems mounted below it "
            f"({MOUNTINFO}: {exc.strerror}); load policies with mounts where {MOUNTINFO} "
            "is readable, or remove the mount"
        ) from None
    return sorted({p for p in points if p != source and _is_under(p, source)})


def _check_mount_source(value: str, allowlist: tuple[str, ...]) -> str:
    """Where a read-only host mount may come from.

    Checked when the policy is loaded: a filesystem mounted below the source
    later is not seen (keep allowlisted roots free of mounts).
    """
    what = "mount source"
    _check_abs_path(value, what)
    if value == "/":
        raise ValueError(
            f"{what} '/' is the whole host filesystem; mount a dedicated data directory instead"
        )
    for sock in DOCKER_SOCKET_PATHS:
        if _is_under(sock, value):
            raise ValueError(
                f"{what} {value!r} is or contains the Docker socket {sock}, which is root on "
                "the host; remove the mount"
            )
    for system in SYSTEM_PATHS:
        if _is_under(system, value):
            raise ValueError(
                f"{what} {value!r} is the system path {system} or contains it; mount a "
                "dedicated data directory instead"
            )
    for system in NO_DESCENDANT_SOURCES:
        if _is_under(value, system):
            raise ValueError(
                f"{what} {value!r} is inside {system}, which is never mounted into a sandbox; "
                "copy the data to a dedicated directory"
            )
    if not any(_is_under(value, root) for root in allowlist):
        listed = ", ".join(allowlist) if allowlist else "nothing"
        raise ValueError(
            f"{what} {value!r} is not under an allowlisted root (allowed: {listed}); add its "
            f"root to {MOUNT_ALLOWLIST_ENV} or remove the mount"
        )
    real = os.path.realpath(value)
    if real != value:
        raise ValueError(
            f"{what} {value!r} goes through a symbolic link (it resolves to {real!r}); "
            "write the real path, without links"
        )
    if not os.path.exists(value):
        raise ValueError(f"{what} {value!r} does not exist on this host; create it or fix the path")
    below = _mounts_below(value)
    if below:
        shown = ", ".join(repr(p) for p in below[:3])
        if len(below) > 3:
            shown += f" and {len(below) - 3} more"
        raise ValueError(
            f"{what} {value!r} has another filesystem mounted below it ({shown}); a read-only "
            "bind mount does not make the mounts below it read-only, so sandboxed code could "
            "write there; unmount it, or mount a directory that has no mount below it"
        )
    return value


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


_Cpus = Annotated[float, Field(ge=MIN_CPUS, le=MAX_CPUS, allow_inf_nan=False)]
_MemoryMb = Annotated[int, Field(ge=MIN_MEMORY_MB, le=MAX_MEMORY_MB)]
_Pids = Annotated[int, Field(ge=MIN_PIDS, le=MAX_PIDS)]
_Seconds = Annotated[float, Field(ge=MIN_TIME_S, le=MAX_TIME_S, allow_inf_nan=False)]
_OutputBytes = Annotated[int, Field(ge=MIN_OUTPUT_BYTES, le=MAX_OUTPUT_BYTES)]
_OpenFiles = Annotated[int, Field(ge=MIN_OPEN_FILES, le=MAX_OPEN_FILES)]
_FileSizeMb = Annotated[int, Field(ge=MIN_FILE_SIZE_MB, le=MAX_FILE_SIZE_MB)]
_Id = Annotated[int, Field(ge=MIN_UID, le=MAX_UID)]


class Resources(_Model):
    """Resource limits of one sandbox and of each execution in it."""

    cpus: _Cpus = DEFAULT_CPUS
    memory_mb: _MemoryMb = DEFAULT_MEMORY_MB
    swap_mb: int = SWAP_MB
    pids: _Pids = DEFAULT_PIDS
    wall_time_s: _Seconds = DEFAULT_WALL_TIME_S
    cpu_time_s: _Seconds = DEFAULT_CPU_TIME_S
    compile_time_s: _Seconds = DEFAULT_COMPILE_TIME_S
    stdout_bytes: _OutputBytes = DEFAULT_OUTPUT_BYTES
    stderr_bytes: _OutputBytes = DEFAULT_OUTPUT_BYTES
    open_files: _OpenFiles = DEFAULT_OPEN_FILES
    file_size_mb: _FileSizeMb = DEFAULT_FILE_SIZE_MB

    @field_validator("swap_mb")
    @classmethod
    def _swap_off(cls, value: int) -> int:
        if value != SWAP_MB:
            raise ValueError(
                f"swap must stay off: memory_mb is the hard limit and swap would let code "
                f"escape it; set swap_mb to {SWAP_MB} or remove the key"
            )
        return value


class TmpfsSpec(_Model):
    """Size of an in-memory filesystem."""

    size_mb: Annotated[int, Field(ge=MIN_TMPFS_MB, le=MAX_TMPFS_MB)]
    inodes: Annotated[int, Field(ge=MIN_TMPFS_INODES, le=MAX_TMPFS_INODES)]


class ExtraTmpfs(TmpfsSpec):
    """An additional writable tmpfs at ``path`` inside the container."""

    path: str

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return _check_container_target(value, "tmpfs path")


class Mount(_Model):
    """A host directory mounted read-only into the container.

    There is no ``read_only``/``rw`` key: host mounts are always read-only. The
    source must be under a root of the mount allowlist (the ``mount_allowlist``
    validation context, else :data:`MOUNT_ALLOWLIST_ENV`).
    """

    source: str
    target: str

    @model_validator(mode="before")
    @classmethod
    def _no_write_switch(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for key in data:
                if isinstance(key, str) and _normalise_key(key) in {
                    "readonly",
                    "rw",
                    "ro",
                    "mode",
                    "writable",
                    "options",
                    "propagation",
                }:
                    raise _KeyedValueError(
                        f"mounts are always read-only and take only 'source' and 'target'; "
                        f"remove {key!r}",
                        key,
                    )
        return data

    @field_validator("source")
    @classmethod
    def _source(cls, value: str, info: ValidationInfo) -> str:
        context = info.context if isinstance(info.context, Mapping) else {}
        roots = context.get("mount_allowlist")
        if roots is None:
            roots = _allowlist_roots(None)
        return _check_mount_source(value, tuple(roots))

    @field_validator("target")
    @classmethod
    def _target(cls, value: str) -> str:
        return _check_container_target(value, "mount target")


_DEFAULT_TMPFS = TmpfsSpec(size_mb=DEFAULT_TMPFS_MB, inodes=DEFAULT_TMPFS_INODES)


class Filesystem(_Model):
    """The container's filesystem: read-only root, tmpfs workspaces, read-only mounts."""

    read_only_root: bool = True
    workspace: TmpfsSpec = _DEFAULT_TMPFS
    tmp: TmpfsSpec = _DEFAULT_TMPFS
    shm_mb: Annotated[int, Field(ge=MIN_SHM_MB, le=MAX_SHM_MB)] = DEFAULT_SHM_MB
    extra_tmpfs: Annotated[
        tuple[ExtraTmpfs, ...], Field(strict=False, max_length=MAX_EXTRA_TMPFS)
    ] = ()
    mounts: Annotated[tuple[Mount, ...], Field(strict=False, max_length=MAX_MOUNTS)] = ()

    @field_validator("read_only_root")
    @classmethod
    def _read_only(cls, value: bool) -> bool:
        if not value:
            raise ValueError(
                "a writable root filesystem is refused: sandboxed code could plant files "
                "that outlive a reset; write to /workspace, /tmp or filesystem.extra_tmpfs "
                "and set read_only_root: true (or remove the key)"
            )
        return value

    @field_validator("workspace", "tmp", mode="before")
    @classmethod
    def _tmpfs_defaults(cls, value: Any) -> Any:
        # A partial {size_mb: 16} keeps the default inode count (and vice versa).
        if isinstance(value, Mapping):
            return {**_DEFAULT_TMPFS.model_dump(), **value}
        return value

    @model_validator(mode="after")
    def _unique_targets(self) -> Filesystem:
        seen: dict[str, str] = {}
        places: list[tuple[str, _KeyPath]] = []
        places += [(t.path, ("extra_tmpfs", i, "path")) for i, t in enumerate(self.extra_tmpfs)]
        places += [(m.target, ("mounts", i, "target")) for i, m in enumerate(self.mounts)]
        for target, where in places:
            if target in seen:
                raise _KeyedValueError(
                    f"{target!r} is already used by filesystem.{seen[target]}; give each "
                    "mount and tmpfs its own target",
                    *where,
                )
            seen[target] = _dotted(where)
        return self


class AllowRule(_Model):
    """One destination sandboxed code may reach through the egress proxy.

    Exactly one of ``host`` (an exact name), ``domain`` (``example.com`` or
    ``*.example.com``: the domain's subdomains, not the domain itself) or
    ``cidr`` (addresses, for raw-IP access); ``ports`` limits the ports
    (default 80 and 443).
    """

    host: str | None = None
    domain: str | None = None
    cidr: str | None = None
    ports: Annotated[
        tuple[Annotated[int, Field(ge=1, le=65535)], ...], Field(strict=False, max_length=64)
    ] = (80, 443)

    @model_validator(mode="after")
    def _exactly_one(self) -> AllowRule:
        given = [name for name in ("host", "domain", "cidr") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "each rule names exactly one of host, domain or cidr (and optionally ports)"
            )
        if self.host is not None and not HOSTNAME_RE.fullmatch(self.host):
            raise _KeyedValueError(f"{self.host!r} is not a host name", "host")
        if self.domain is not None and not HOSTNAME_RE.fullmatch(self.domain.removeprefix("*.")):
            raise _KeyedValueError(f"{self.domain!r} is not a domain", "domain")
        if self.cidr is not None:
            try:
                ipaddress.ip_network(self.cidr, strict=False)
            except ValueError as exc:
                raise _KeyedValueError(f"{self.cidr!r} is not a CIDR: {exc}", "cidr") from None
        if not self.ports:
            raise _KeyedValueError("ports may not be empty (leave it out for 80 and 443)", "ports")
        return self


class Network(_Model):
    """Network access: ``none`` (the default), or ``allowlist``.

    With ``allowlist`` the container sits alone on an internal network whose only
    way out is the service's egress proxy (``HTTP_PROXY``/``HTTPS_PROXY`` are
    set); the proxy resolves names itself and lets through only what ``allow``
    lists. Private, loopback, link-local (cloud metadata) and other special
    addresses are refused unless a ``cidr`` rule names them. No DNS or UDP
    leaves the sandbox.
    """

    mode: Literal["none", "allowlist"] = "none"
    allow: Annotated[tuple[AllowRule, ...], Field(strict=False, max_length=MAX_ALLOW_RULES)] = ()

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in NETWORK_MODES:
            if value.lower() == "host":
                raise ValueError(
                    "host networking is refused: it shares the host's network stack and "
                    "services with sandboxed code; use mode: allowlist with the destinations "
                    "the code needs, or mode: none"
                )
            modes = ", ".join(repr(m) for m in NETWORK_MODES)
            raise ValueError(f"network mode {value!r} is not available; use one of {modes}")
        return value

    @model_validator(mode="after")
    def _allow_needs_allowlist(self) -> Network:
        if self.mode == "none" and self.allow:
            raise _KeyedValueError(
                "allow rules need mode: allowlist (with mode: none nothing is reachable)", "allow"
            )
        if self.mode == "allowlist" and not self.allow:
            raise _KeyedValueError(
                "mode: allowlist needs at least one allow rule (or use mode: none)", "allow"
            )
        return self


class User(_Model):
    """The unprivileged ids of candidate code and of hidden tests (root stays the runner's).

    Hidden tests run as ``judge_uid``, which candidate code (``uid``) can neither
    signal, trace nor read the files of.
    """

    uid: _Id = DEFAULT_UID
    gid: _Id = DEFAULT_GID
    judge_uid: _Id = DEFAULT_JUDGE_UID
    judge_gid: _Id = DEFAULT_JUDGE_GID

    @model_validator(mode="after")
    def _distinct(self) -> User:
        if self.judge_uid == self.uid:
            raise _KeyedValueError(
                f"judge_uid must differ from uid ({self.uid}): hidden tests must be out of "
                f"the candidate's reach; use e.g. {self.uid + 1}",
                "judge_uid",
            )
        if self.judge_gid == self.gid:
            raise _KeyedValueError(
                f"judge_gid must differ from gid ({self.gid}); use e.g. {self.gid + 1}",
                "judge_gid",
            )
        return self

    @field_validator("uid", "gid", "judge_uid", "judge_gid", mode="before")
    @classmethod
    def _not_root(cls, value: Any, info: ValidationInfo) -> Any:
        if type(value) is int and value == 0:
            raise ValueError(
                f"{info.field_name} 0 is root, which belongs to the runner; use an "
                f"unprivileged id between {MIN_UID} and {MAX_UID}, e.g. {DEFAULT_UID}"
            )
        return value


def _check_env_name(name: str, where: str) -> None:
    if len(name) > MAX_ENV_NAME_LEN:
        raise ValueError(f"{where} name {name[:40]!r}... is longer than {MAX_ENV_NAME_LEN}")
    if not ENV_NAME_RE.fullmatch(name):
        raise ValueError(
            f"{where} name {name!r} is not a valid variable name; use letters, digits and "
            "'_', not starting with a digit"
        )
    if name.startswith("LD_"):
        raise ValueError(
            f"{where} name {name!r} would change how the dynamic loader runs programs; remove it"
        )


def _freeze_env(value: Mapping[str, str]) -> Mapping[str, str]:
    if len(value) > MAX_ENV_VARS:
        raise ValueError(f"{len(value)} variables; the maximum is {MAX_ENV_VARS}")
    for name, text in value.items():
        try:
            _check_env_name(name, "variable")
        except ValueError as exc:
            raise _KeyedValueError(str(exc), name) from None
        if "\x00" in text:
            raise _KeyedValueError(f"the value of {name} contains a NUL byte; remove it", name)
        if len(text) > MAX_ENV_VALUE_LEN:
            raise _KeyedValueError(
                f"the value of {name} is {len(text)} characters; the maximum is "
                f"{MAX_ENV_VALUE_LEN}",
                name,
            )
    return _FrozenDict(value)


class Env(_Model):
    """Environment of user code: fixed variables and names a request may pass through."""

    set: Annotated[Mapping[str, str], AfterValidator(_freeze_env)] = _FrozenDict()
    allow: Annotated[
        tuple[Annotated[str, Strict()], ...], Field(strict=False, max_length=MAX_ENV_VARS)
    ] = ()

    @field_validator("allow")
    @classmethod
    def _allow(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        seen: list[str] = []
        for i, name in enumerate(value):
            try:
                _check_env_name(name, "allowed variable")
            except ValueError as exc:
                raise _KeyedValueError(str(exc), i) from None
            if name in PROTECTED_ENV_NAMES:
                raise _KeyedValueError(
                    f"{name} is an interpreter start-up hook and a request may never set it; "
                    "remove it from env.allow (put a fixed value in env.set if you need one)",
                    i,
                )
            if name in seen:
                raise _KeyedValueError(f"{name} is listed twice; remove one", i)
            seen.append(name)
        return value

    @model_validator(mode="after")
    def _disjoint(self) -> Env:
        for i, name in enumerate(self.allow):
            if name in self.set:
                raise _KeyedValueError(
                    f"{name} is both fixed in env.set and allowed from requests; remove it "
                    "from one of them",
                    "allow",
                    i,
                )
        return self


class PoolSettings(_Model):
    """Pre-warmed containers kept for this policy and their recycling."""

    warm: Annotated[int, Field(ge=MIN_POOL_WARM, le=MAX_POOL_WARM)] = DEFAULT_POOL_WARM
    max: Annotated[int, Field(ge=MIN_POOL_MAX, le=MAX_POOL_MAX)] = DEFAULT_POOL_MAX
    max_uses: Annotated[int, Field(ge=MIN_MAX_USES, le=MAX_MAX_USES)] = DEFAULT_MAX_USES
    session_idle_ttl_s: Annotated[
        float, Field(ge=MIN_SESSION_TTL_S, le=MAX_SESSION_TTL_S, allow_inf_nan=False)
    ] = DEFAULT_SESSION_TTL_S

    @model_validator(mode="after")
    def _warm_le_max(self) -> PoolSettings:
        if self.warm > self.max:
            raise _KeyedValueError(
                f"pool.warm ({self.warm}) is larger than pool.max ({self.max}); lower warm "
                "or raise max",
                "warm",
            )
        return self


class Policy(_Model):
    """A complete, validated security policy. Immutable.

    ``name`` comes from the file name, never from the YAML. :attr:`digest`
    identifies the resolved content, so two policies with equal digests give
    identical sandboxes.
    """

    name: str
    resources: Resources = Resources()
    filesystem: Filesystem = Filesystem()
    network: Network = Network()
    runtime: Literal["runc", "runsc"] = "runc"
    user: User = User()
    env: Env = Env()
    pool: PoolSettings = PoolSettings()

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if len(value) > MAX_POLICY_NAME_LEN or not POLICY_NAME_RE.fullmatch(value):
            raise ValueError(
                f"policy name {value!r} must be 1..{MAX_POLICY_NAME_LEN} characters of "
                "letters, digits, '.', '_' or '-', starting with a letter or digit; rename "
                "the file"
            )
        return value

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 (hex) of the resolved content, excluding ``name``; stable across runs."""
        content = self.model_dump(mode="json", exclude={"name"})
        blob = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(blob.encode("ascii")).hexdigest()


class LimitOverrides(_Model):
    """Limits a request may send to *lower* its policy's; ``None`` keeps the policy's."""

    wall_time_s: _Seconds | None = None
    cpu_time_s: _Seconds | None = None
    compile_time_s: _Seconds | None = None
    memory_mb: _MemoryMb | None = None
    stdout_bytes: _OutputBytes | None = None
    stderr_bytes: _OutputBytes | None = None
    open_files: _OpenFiles | None = None
    file_size_mb: _FileSizeMb | None = None


def effective_limits(policy: Policy, overrides: LimitOverrides | None) -> Resources:
    """The policy's resources, lowered by ``overrides``.

    Raises :class:`~sandbox.errors.LimitError` naming the field, the requested
    value and the policy's maximum when an override is above the policy.
    """
    if overrides is None:
        return policy.resources
    current = policy.resources.model_dump()
    lowered: dict[str, Any] = {}
    for field, requested in overrides.model_dump(exclude_none=True).items():
        maximum = current[field]
        if requested > maximum:
            raise LimitError(
                f"{field}={_show(requested)} exceeds policy {policy.name!r} maximum "
                f"{_show(maximum)}; ask for at most {_show(maximum)}"
            )
        lowered[field] = requested
    if not lowered:
        return policy.resources
    return Resources.model_validate({**current, **lowered})


# --------------------------------------------------------------------------------------
# YAML loading
# --------------------------------------------------------------------------------------


class _YamlRefusal(Exception):
    def __init__(self, message: str, mark: Any, path: _KeyPath) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark
        self.path = path


_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_YAML_KINDS: Final = {
    "tag:yaml.org,2002:int": "an integer",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "a boolean",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:timestamp": "a date",
    "tag:yaml.org,2002:seq": "a list",
    "tag:yaml.org,2002:map": "a mapping",
}


class _PolicyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` restricted to plain data.

    Refuses tags (even ``!!str``), anchors, aliases, directives, merge keys,
    non-string keys, duplicate keys and nesting deeper than
    :data:`MAX_YAML_NESTING`, naming the key path of each refusal.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str | int] = []
        self._depth = 0

    def fetch_directive(self) -> None:
        raise _YamlRefusal(
            "YAML directives ('%YAML', '%TAG') are refused; remove the line",
            self.get_mark(),
            (),
        )

    def compose_node(self, parent: Any, index: Any) -> Any:
        part: str | int | None = None
        if isinstance(parent, yaml.MappingNode) and isinstance(index, yaml.ScalarNode):
            part = index.value
        elif isinstance(parent, yaml.SequenceNode) and isinstance(index, int):
            part = index
        if part is not None:
            self._path.append(part)
        self._depth += 1
        try:
            return self._compose_checked(parent, index)
        finally:
            self._depth -= 1
            if part is not None:
                self._path.pop()

    def _compose_checked(self, parent: Any, index: Any) -> Any:
        path = tuple(self._path)
        event = self.peek_event()
        if self._depth > MAX_YAML_NESTING:
            raise _YamlRefusal(
                f"nesting is deeper than {MAX_YAML_NESTING} levels; a policy is never that deep",
                event.start_mark,
                path,
            )
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _YamlRefusal(
                "YAML anchors (&name) and aliases (*name) are refused; write the values out",
                event.start_mark,
                path,
            )
        tag = getattr(event, "tag", None)
        if tag is not None:
            if tag.startswith("tag:yaml.org,2002:"):
                tag = "!!" + tag.removeprefix("tag:yaml.org,2002:")
            raise _YamlRefusal(
                f"YAML tags are refused (found {tag!r}): a policy is plain data; remove the tag",
                event.start_mark,
                path,
            )
        node = super().compose_node(parent, index)
        if isinstance(node, yaml.MappingNode):
            self._check_keys(node, path)
        return node

    def _check_keys(self, node: yaml.MappingNode, path: _KeyPath) -> None:
        seen: dict[str, Any] = {}
        for key_node, _value in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == _MERGE_TAG:
                raise _YamlRefusal(
                    "merge keys (<<) are refused; write the keys out",
                    key_node.start_mark,
                    path,
                )
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR_TAG:
                shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else "..."
                kind = _YAML_KINDS.get(key_node.tag, "a " + key_node.tag.rsplit(":", 1)[-1])
                raise _YamlRefusal(
                    f"key {shown!r} is read as {kind}, not a string; quote it or rename it",
                    key_node.start_mark,
                    path,
                )
            key = key_node.value
            if key in seen:
                first = seen[key]
                raise _YamlRefusal(
                    f"duplicate key {key!r} (first at line {first.line + 1}); keep only one",
                    key_node.start_mark,
                    (*path, key),
                )
            seen[key] = key_node.start_mark


def load_yaml_mapping(text: str, source: str) -> dict[str, Any]:
    """Parse one strict YAML document (no tags, aliases, duplicate keys) into a mapping.

    The loader policies use, for other configuration files too (training configs,
    task files); raises :class:`~sandbox.errors.PolicyError` naming ``source``.
    """
    return _load_yaml(text, source)


def _load_yaml(text: str, source: str) -> dict[str, Any]:
    """Parse one policy document into plain data, or raise :class:`PolicyError`."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_POLICY_BYTES:
        raise PolicyError(
            f"the file is {size} bytes; a policy may be at most {MAX_POLICY_BYTES} bytes. "
            "Split it with 'extends' or remove unused keys",
            source=source,
        )
    loader = _PolicyLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.composer.ComposerError as exc:
            if "single document" in str(exc.context or ""):
                mark = exc.problem_mark
                raise PolicyError(
                    f"line {mark.line + 1 if mark else '?'}: the file holds more than one YAML "
                    "document; a policy is exactly one document, so remove the extra '---'",
                    source=source,
                ) from None
            raise
        data = None if node is None else loader.construct_document(node)
    except _YamlRefusal as exc:
        mark = exc.mark
        raise PolicyError(
            f"line {mark.line + 1}, column {mark.column + 1}: {exc.message}",
            source=source,
            key=_dotted(exc.path),
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "cannot be parsed"
        raise PolicyError(
            f"invalid YAML at {where}{problem}; fix the syntax", source=source
        ) from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"invalid YAML: {exc}; fix the file", source=source) from None
    finally:
        loader.dispose()
    if data is None:
        raise PolicyError(
            "the file is empty; write at least one section (e.g. 'extends: default')",
            source=source,
        )
    if not isinstance(data, dict):
        raise PolicyError(
            f"the document is a {type(data).__name__}, not a mapping of keys; start with "
            "keys such as 'resources:'",
            source=source,
        )
    return data


def _check_raw(data: Any, path: _KeyPath, source: str) -> None:
    """Refuse dangerous keys, nulls and a YAML ``name`` before model validation."""
    if isinstance(data, dict):
        is_env_names = path == ("env", "set")
        for key, value in data.items():
            here = (*path, key)
            if not path and key == "name":
                raise PolicyError(
                    "the policy name comes from the file name and cannot be set in the file; "
                    "remove the key (or rename the file)",
                    source=source,
                    key="name",
                )
            if not is_env_names:
                reason = _DANGEROUS_KEYS.get(_normalise_key(key))
                if reason is not None:
                    raise PolicyError(
                        f"{key!r} is a dangerous setting and is refused: {reason}; remove it",
                        source=source,
                        key=_dotted(here),
                    )
            if value is None:
                raise PolicyError(
                    "has no value (null); give it a value or remove the key",
                    source=source,
                    key=_dotted(here),
                )
            _check_raw(value, here, source)
    elif isinstance(data, list):
        for i, item in enumerate(data):
            if item is None:
                raise PolicyError(
                    "list entry is empty (null); remove it",
                    source=source,
                    key=_dotted((*path, i)),
                )
            _check_raw(item, (*path, i), source)


def _read_policy_file(path: Path, source: str) -> str:
    """Read a policy file: a regular file, at most :data:`MAX_POLICY_BYTES`, UTF-8."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise PolicyError("no such file; check the path", source=source) from None
    except OSError as exc:
        raise PolicyError(f"cannot read the file: {exc.strerror}", source=source) from None
    if not stat.S_ISREG(info.st_mode):
        raise PolicyError("not a regular file; point at a .yaml file", source=source)
    if info.st_size > MAX_POLICY_BYTES:
        raise PolicyError(
            f"the file is {info.st_size} bytes; a policy may be at most {MAX_POLICY_BYTES} "
            "bytes. Split it with 'extends' or remove unused keys",
            source=source,
        )
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        raise PolicyError(f"cannot read the file: {exc.strerror}", source=source) from None
    if len(raw) > MAX_POLICY_BYTES:
        raise PolicyError(
            f"the file is more than {MAX_POLICY_BYTES} bytes; split it with 'extends'",
            source=source,
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(
            f"the file is not UTF-8 (byte {exc.start}); save it as UTF-8", source=source
        ) from None


def _find_parent(ref: Any, base_dir: Path | None, source: str) -> Path:
    """Resolve an ``extends`` value to a file next to (or relative to) the child."""
    if not isinstance(ref, str) or not ref.strip():
        raise PolicyError(
            f"must be a policy name or a relative .yaml path, not {_show(ref)}",
            source=source,
            key="extends",
        )
    if base_dir is None:
        raise PolicyError(
            "cannot resolve 'extends' for a policy given as text; load it from a file or pass "
            "base_dir",
            source=source,
            key="extends",
        )
    if "\x00" in ref or ref.startswith("/") or ref.startswith("~"):
        raise PolicyError(
            f"{ref!r} must be a sibling policy name (e.g. 'default') or a relative path",
            source=source,
            key="extends",
        )
    if "/" in ref or ref.endswith(POLICY_SUFFIXES):
        if not ref.endswith(POLICY_SUFFIXES):
            raise PolicyError(
                f"{ref!r}: a relative path must name a .yaml or .yml file",
                source=source,
                key="extends",
            )
        candidate = base_dir / ref
        if not candidate.is_file():
            raise PolicyError(
                f"parent policy {ref!r} not found (looked for {candidate}); fix the name",
                source=source,
                key="extends",
            )
        return candidate
    found = [base_dir / f"{ref}{suffix}" for suffix in POLICY_SUFFIXES]
    existing = [p for p in found if p.is_file()]
    if not existing:
        raise PolicyError(
            f"parent policy {ref!r} not found (looked for {', '.join(map(str, found))}); "
            "fix the name",
            source=source,
            key="extends",
        )
    if len(existing) > 1:
        raise PolicyError(
            f"parent policy {ref!r} is ambiguous ({existing[0].name} and {existing[1].name}); "
            "remove one file",
            source=source,
            key="extends",
        )
    return existing[0]


_Origins = dict[_KeyPath, str]


def _record_origins(data: Any, path: _KeyPath, source: str, origins: _Origins) -> None:
    if path:
        origins[path] = source
    if isinstance(data, dict):
        for key, value in data.items():
            _record_origins(value, (*path, key), source, origins)


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; lists and scalars of ``over`` replace ``base``."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _resolve(
    text: str,
    *,
    source: str,
    base_dir: Path | None,
    chain: tuple[str, ...],
    origins: _Origins,
    depth: int = 0,
) -> dict[str, Any]:
    """Load one document and, through ``extends``, its ancestors; merge them.

    ``chain`` holds the resolved paths already on the way (cycle detection),
    ``depth`` the number of ``extends`` hops taken so far.
    """
    data = _load_yaml(text, source)
    _check_raw(data, (), source)
    if "extends" not in data:
        _record_origins(data, (), source, origins)
        return data
    ref = data.pop("extends")
    parent = _find_parent(ref, base_dir, source)
    identity = str(parent.resolve())
    if identity in chain:
        names = " -> ".join(Path(p).name for p in (*chain, identity))
        raise PolicyError(
            f"'extends' forms a cycle ({names}); remove one of the 'extends'",
            source=source,
            key="extends",
        )
    if depth >= MAX_EXTENDS_DEPTH:
        raise PolicyError(
            f"'extends' chains more than {MAX_EXTENDS_DEPTH} files deep; flatten the hierarchy",
            source=source,
            key="extends",
        )
    parent_source = str(parent)
    parent_data = _resolve(
        _read_policy_file(parent, parent_source),
        source=parent_source,
        base_dir=parent.parent,
        chain=(*chain, identity),
        origins=origins,
        depth=depth + 1,
    )
    _record_origins(data, (), source, origins)
    return _deep_merge(parent_data, data)


def _allowed_keys(loc: Sequence[Any]) -> list[str] | None:
    """The keys the model accepts at the mapping that holds ``loc[-1]``."""
    model: type[BaseModel] = Policy
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        annotation = field.annotation
        if get_origin(annotation) is tuple:
            annotation = get_args(annotation)[0]
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return [k for k in model.model_fields if not (model is Policy and k == "name")]


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _describe(error: Mapping[str, Any]) -> str:
    """Turn one pydantic error into a message that says what to change."""
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    loc = error["loc"]
    got = f"got {_kind(value)} {_show(value)}"
    if kind == "extra_forbidden":
        key = str(loc[-1])
        allowed = _allowed_keys(loc) or []
        close = difflib.get_close_matches(key, allowed, n=1)
        did_you_mean = f"; did you mean {close[0]!r}?" if close else ""
        return (
            f"unknown key {key!r}; the keys allowed here are {', '.join(allowed)}"
            f"{did_you_mean} (remove it or fix its spelling)"
        )
    if kind == "missing":
        return "is required here; add it"
    if kind == "int_type":
        hint = ""
        if isinstance(value, str):
            hint = "; write the number without quotes"
        elif isinstance(value, float):
            hint = "; write a whole number, without a decimal point"
        return f"expected a whole number, {got}{hint}"
    if kind == "float_type":
        hint = "; write the number without quotes" if isinstance(value, str) else ""
        return f"expected a number, {got}{hint}"
    if kind == "finite_number":
        return f"expected a finite number, {got}"
    if kind == "bool_type":
        return f"expected true or false, {got}"
    if kind == "string_type":
        return f"expected a string, {got}; put the value in quotes"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected')}, {got}"
    if kind in {"less_than_equal", "less_than"}:
        bound = ctx.get("le", ctx.get("lt"))
        return f"{_show(value)} is above the maximum {_show(bound)}; use at most {_show(bound)}"
    if kind in {"greater_than_equal", "greater_than"}:
        bound = ctx.get("ge", ctx.get("gt"))
        return f"{_show(value)} is below the minimum {_show(bound)}; use at least {_show(bound)}"
    if kind == "too_long":
        return (
            f"has {ctx.get('actual_length')} entries; the maximum is {ctx.get('max_length')}; "
            "remove some"
        )
    if kind in {"model_type", "model_attributes_type", "dict_type", "mapping_type"}:
        return f"expected a mapping of keys, {got}"
    if kind in {"tuple_type", "list_type", "iterable_type"}:
        return f"expected a list, {got}"
    if kind == "value_error":
        return str(ctx.get("error", error.get("msg", "")))
    return str(error.get("msg", "is invalid"))


def _error_location(error: Mapping[str, Any]) -> _KeyPath:
    loc: list[str | int] = [p for p in error["loc"] if p != "[key]"]
    exc = (error.get("ctx") or {}).get("error")
    if isinstance(exc, _KeyedValueError):
        loc.extend(exc.suffix)
    return tuple(loc)


def _policy_error(exc: ValidationError, origins: _Origins, default_source: str) -> PolicyError:
    """Build one :class:`PolicyError` from a pydantic error, naming the right file."""
    errors = exc.errors()
    first = errors[0]
    loc = _error_location(first)
    source = default_source
    for n in range(len(loc), 0, -1):
        if loc[:n] in origins:
            source = origins[loc[:n]]
            break
    message = _describe(first)
    if len(errors) > 1:
        others = "; ".join(f"{_dotted(_error_location(e))}: {_describe(e)}" for e in errors[1:6])
        more = f" (and {len(errors) - 6} more)" if len(errors) > 6 else ""
        message += f". Also: {others}{more}"
    return PolicyError(message, source=source, key=_dotted(loc))


def _validate(
    data: dict[str, Any],
    *,
    name: str,
    source: str,
    origins: _Origins,
    mount_allowlist: Sequence[str] | None,
) -> Policy:
    try:
        roots = _allowlist_roots(mount_allowlist)
    except ValueError as exc:
        filesystem = data.get("filesystem")
        if isinstance(filesystem, dict) and filesystem.get("mounts"):
            raise PolicyError(str(exc), source=source, key="filesystem.mounts") from None
        roots = ()
    try:
        return Policy.model_validate({**data, "name": name}, context={"mount_allowlist": roots})
    except ValidationError as exc:
        raise _policy_error(exc, origins, source) from None


def _parse(
    text: str,
    *,
    name: str,
    source: str,
    base_dir: Path | None,
    mount_allowlist: Sequence[str] | None,
    chain: tuple[str, ...],
) -> Policy:
    origins: _Origins = {}
    data = _resolve(text, source=source, base_dir=base_dir, chain=chain, origins=origins)
    policy = _validate(
        data, name=name, source=source, origins=origins, mount_allowlist=mount_allowlist
    )
    logger.debug("loaded policy %s from %s (digest %s)", policy.name, source, policy.digest[:16])
    return policy


def parse_policy(
    text: str,
    *,
    name: str,
    source: str = "<string>",
    base_dir: Path | None = None,
    mount_allowlist: Sequence[str] | None = None,
) -> Policy:
    """Parse and validate a policy from YAML text.

    ``source`` names the text in error messages; ``base_dir`` is where
    ``extends`` looks for parents (needed only when the text uses it);
    ``mount_allowlist`` overrides :data:`MOUNT_ALLOWLIST_ENV`. Raises
    :class:`~sandbox.errors.PolicyError`.
    """
    return _parse(
        text,
        name=name,
        source=source,
        base_dir=base_dir,
        mount_allowlist=mount_allowlist,
        chain=(),
    )


def _name_from_path(path: Path, source: str) -> str:
    if path.suffix not in POLICY_SUFFIXES:
        raise PolicyError(
            f"a policy file name ends in .yaml or .yml, not {path.suffix or '(nothing)'!r}; "
            "rename the file",
            source=source,
        )
    return path.stem


def load_policy(path: str | Path, *, mount_allowlist: Sequence[str] | None = None) -> Policy:
    """Load ``path`` (``<name>.yaml``), following ``extends``; the name is the file stem.

    Raises :class:`~sandbox.errors.PolicyError`.
    """
    path = Path(path)
    source = str(path)
    name = _name_from_path(path, source)
    text = _read_policy_file(path, source)
    return _parse(
        text,
        name=name,
        source=source,
        base_dir=path.parent,
        mount_allowlist=mount_allowlist,
        chain=(str(path.resolve()),),
    )


def load_policy_dir(
    directory: str | Path, *, mount_allowlist: Sequence[str] | None = None
) -> dict[str, Policy]:
    """Load every ``*.yaml``/``*.yml`` in ``directory``, keyed by name.

    The first bad file raises :class:`~sandbox.errors.PolicyError`; two files
    with one name (``a.yaml`` and ``a.yml``) are refused.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise PolicyError("not a directory; point at the policies folder", source=str(directory))
    policies: dict[str, Policy] = {}
    for path in sorted(_policy_files(directory)):
        policy = load_policy(path, mount_allowlist=mount_allowlist)
        if policy.name in policies:
            raise PolicyError(
                f"a second policy named {policy.name!r}; keep only one of {policy.name}.yaml "
                f"and {policy.name}.yml",
                source=str(path),
            )
        policies[policy.name] = policy
    return policies


def _policy_files(directory: Path) -> Iterator[Path]:
    for entry in directory.iterdir():
        if entry.suffix in POLICY_SUFFIXES and entry.is_file():
            yield entry


# --------------------------------------------------------------------------------------
# Lint
# --------------------------------------------------------------------------------------


def lint_policy(policy: Policy) -> list[str]:
    """Warnings about settings that are legal but worth a second look."""
    r, fs, warnings = policy.resources, policy.filesystem, []
    if policy.pool.warm == 0:
        warnings.append(
            "pool.warm is 0: every first request waits for a container to start (~250 ms+)"
        )
    if policy.runtime == "runsc":
        warnings.append(
            "runtime is runsc: Docker must have the gVisor 'runsc' runtime registered "
            "(daemon.json 'runtimes'), with --network=none in its runtime args"
        )
    if r.wall_time_s > LINT_WALL_CPU_RATIO * r.cpu_time_s:
        warnings.append(
            f"resources.wall_time_s ({_show(r.wall_time_s)}) is more than "
            f"{_show(LINT_WALL_CPU_RATIO)}x cpu_time_s ({_show(r.cpu_time_s)}): sleeping or "
            "blocked code can hold a container for long"
        )
    if r.memory_mb < LINT_PYTHON_MIN_MEMORY_MB:
        warnings.append(
            f"resources.memory_mb is {r.memory_mb}: a Python interpreter needs about "
            f"{LINT_PYTHON_MIN_MEMORY_MB} MB"
        )
    if r.pids < LINT_MIN_PIDS:
        warnings.append(
            f"resources.pids is {r.pids}: multi-threaded runtimes (Java, Go, Node) may fail "
            "to start"
        )
    tmpfs_mb = fs.workspace.size_mb + fs.tmp.size_mb + fs.shm_mb
    tmpfs_mb += sum(t.size_mb for t in fs.extra_tmpfs)
    if tmpfs_mb > r.memory_mb:
        warnings.append(
            f"tmpfs sizes add up to {tmpfs_mb} MB, more than memory_mb ({r.memory_mb}): tmpfs "
            "pages count as container memory, so filling them ends in an OOM kill, not ENOSPC"
        )
    for i, mount in enumerate(fs.mounts):
        warnings.append(
            f"filesystem.mounts[{i}]: {mount.source} is readable by untrusted code; make sure "
            "it holds nothing secret"
        )
    for name in policy.env.set:
        if name in PROTECTED_ENV_NAMES:
            warnings.append(f"env.set.{name} changes how interpreters start; is it intended?")
    return warnings
