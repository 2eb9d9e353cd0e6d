"""The frozen policy model (pydantic, ``extra="forbid"``, strict types and bounds), and how a
request may only lower its limits (:class:`LimitOverrides`, :func:`effective_limits`).
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sandbox.errors import LimitError

from .keys import _dotted, _FrozenDict, _KeyedValueError, _KeyPath, _normalise_key, _show
from .limits import (
    DEFAULT_COMPILE_TIME_S,
    DEFAULT_CPU_TIME_S,
    DEFAULT_CPUS,
    DEFAULT_FILE_SIZE_MB,
    DEFAULT_GID,
    DEFAULT_JUDGE_GID,
    DEFAULT_JUDGE_UID,
    DEFAULT_MAX_USES,
    DEFAULT_MEMORY_MB,
    DEFAULT_OPEN_FILES,
    DEFAULT_OUTPUT_BYTES,
    DEFAULT_PIDS,
    DEFAULT_POOL_MAX,
    DEFAULT_POOL_WARM,
    DEFAULT_SESSION_TTL_S,
    DEFAULT_SHM_MB,
    DEFAULT_TMPFS_INODES,
    DEFAULT_TMPFS_MB,
    DEFAULT_UID,
    DEFAULT_WALL_TIME_S,
    ENV_NAME_RE,
    HOSTNAME_RE,
    MAX_ALLOW_RULES,
    MAX_CPUS,
    MAX_ENV_NAME_LEN,
    MAX_ENV_VALUE_LEN,
    MAX_ENV_VARS,
    MAX_EXTRA_TMPFS,
    MAX_FILE_SIZE_MB,
    MAX_MAX_USES,
    MAX_MEMORY_MB,
    MAX_MOUNTS,
    MAX_OPEN_FILES,
    MAX_OUTPUT_BYTES,
    MAX_PIDS,
    MAX_POLICY_NAME_LEN,
    MAX_POOL_MAX,
    MAX_POOL_WARM,
    MAX_SESSION_TTL_S,
    MAX_SHM_MB,
    MAX_TIME_S,
    MAX_TMPFS_INODES,
    MAX_TMPFS_MB,
    MAX_UID,
    MIN_CPUS,
    MIN_FILE_SIZE_MB,
    MIN_MAX_USES,
    MIN_MEMORY_MB,
    MIN_OPEN_FILES,
    MIN_OUTPUT_BYTES,
    MIN_PIDS,
    MIN_POOL_MAX,
    MIN_POOL_WARM,
    MIN_SESSION_TTL_S,
    MIN_SHM_MB,
    MIN_TIME_S,
    MIN_TMPFS_INODES,
    MIN_TMPFS_MB,
    MIN_UID,
    NETWORK_MODES,
    POLICY_NAME_RE,
    PROTECTED_ENV_NAMES,
    SWAP_MB,
)
from .paths import _allowlist_roots, _check_container_target, _check_mount_source


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
    root: bool = False
    """Commands run as uid 0 (gVisor only): in a container that is the session's alone,
    never reset nor reused, its root file system writable with the writes held in the
    sandbox's memory (docs/security.md, "Root inside the sandbox")."""

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

    @model_validator(mode="after")
    def _root_under_gvisor(self) -> Policy:
        if self.user.root and self.runtime != "runsc":
            raise _KeyedValueError(
                "user.root runs commands as uid 0, which is allowed only under gVisor; "
                "set runtime: runsc, or remove user.root",
                "user",
                "root",
            )
        return self

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
