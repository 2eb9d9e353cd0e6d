"""Dangerous keys, refused wherever they appear with a reason, and the key paths and value
rendering that every refusal message uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NoReturn

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


_Origins = dict[_KeyPath, str]
