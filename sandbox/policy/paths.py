"""Path checks shared by mounts and extra tmpfs: container targets and host mount sources
(under an allowlisted root, no system path, no link to one, nothing mounted below).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Sequence

from .limits import (
    CONTAINER_SYSTEM_DIRS,
    DOCKER_SOCKET_PATHS,
    FORBIDDEN_TARGET_ROOTS,
    MAX_PATH_LEN,
    MOUNT_ALLOWLIST_ENV,
    MOUNTINFO,
    NO_DESCENDANT_SOURCES,
    RESERVED_TARGETS,
    SYSTEM_PATHS,
)


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
    for system in CONTAINER_SYSTEM_DIRS:
        if _is_under(value, system) or _is_under(system, value):
            raise ValueError(
                f"{what} {value!r} is, holds or lies in the system directory {system}, where "
                "writable files could change what root runs; choose a directory such as /app"
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
