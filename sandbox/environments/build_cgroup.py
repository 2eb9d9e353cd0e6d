"""A cgroup of its own for each build: its steps' processes are bounded, and run under gVisor.

The engine's classic builder takes a memory limit for the steps but no pids limit:
a step could fork until the host has no process left. It does take a *cgroup
parent*, under which it creates each step's cgroup, and a parent's ``pids.max``
bounds everything below it. So every build gets a fresh parent
``/sandbox-build/<token>`` in the pids hierarchy (cgroup v1's ``pids`` mount, or
the unified v2 tree) with ``pids.max`` set to the operator's ``build_pids``, and
the parent is removed once the build's steps are gone.

The same parent is what puts the steps under gVisor: the engine's default runtime,
``sandbox-build`` (:mod:`sandbox.host.engine`), runs a container whose cgroup parent
is ``/sandbox-build/gvisor-<token>`` with runsc, and every other container with runc. Only
the service sets a build's cgroup parent (a build API argument; a Dockerfile cannot).

This needs the engine's ``cgroupfs`` driver and the cgroup file system writable
from this process (a service in a container without it cannot): else the build
is refused, naming ``build_pids: 0`` (no limit) and ``build_runtime: engine`` as
the operator's way out.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from sandbox.errors import EngineError
from sandbox.host.engine import RUNTIME_BUILD

BUILD_CGROUP_ROOT = "sandbox-build"
#: A build's cgroup named so puts its steps under gVisor (build-runtime.sh looks for it).
GVISOR_PREFIX = "gvisor-"
#: A build's cgroup this old belongs to no running build (build_timeout_s is at most 7200).
STALE_AFTER_S = 3 * 3600
#: How long a finished build waits for its steps' cgroups to go before leaving its own.
REMOVE_WAIT_S = 5
_NO_LIMIT_HINT = (
    "; to build without a process limit and outside gVisor (only for tenants you trust), "
    "set build_pids: 0 and build_runtime: engine in the environments config"
)


#: Host tasks (threads) gVisor (the ptrace platform) runs for a step: about 44 for a shell,
#: and 8 more for each process in it (measured: 100 sleeping children, 839).
GVISOR_BASE_TASKS = 128
GVISOR_TASKS_PER_TASK = 12


def require_gvisor_steps(engine_info: dict[str, Any]) -> None:
    """Raise :class:`EngineError` unless the engine runs builds' steps under gVisor."""
    default = engine_info.get("DefaultRuntime")
    if default != RUNTIME_BUILD:
        raise EngineError(
            f"the engine's default runtime is {default!r}, not {RUNTIME_BUILD!r}, so a "
            "build's steps would run as root on the host's kernel: as root on the engine's "
            "machine run `sandbox engine ensure` (it registers the runtime and makes it the "
            "default), or, only for tenants you trust, set build_runtime: engine in the "
            "environments config"
        )


def pids_root(engine_info: dict[str, Any]) -> Path:
    """The pids hierarchy's directory that holds the builds' cgroups.

    Raises :class:`EngineError` when the engine does not place containers by cgroup
    path (the systemd driver) or this process sees no pids hierarchy."""
    driver = engine_info.get("CgroupDriver")
    if driver != "cgroupfs":
        raise EngineError(
            f"the engine's cgroup driver is {driver!r}: a build's process limit needs "
            "'cgroupfs'" + _NO_LIMIT_HINT
        )
    version = str(engine_info.get("CgroupVersion") or "1")
    for part in psutil.disk_partitions(all=True):
        if version == "2" and part.fstype == "cgroup2" and part.mountpoint == "/sys/fs/cgroup":
            return Path(part.mountpoint) / BUILD_CGROUP_ROOT
        if version == "1" and part.fstype == "cgroup" and "pids" in part.opts.split(","):
            return Path(part.mountpoint) / BUILD_CGROUP_ROOT
    raise EngineError(f"no cgroup v{version} pids hierarchy is mounted here" + _NO_LIMIT_HINT)


@contextlib.contextmanager
def build_cgroup(root: Path, pids: int, *, gvisor: bool) -> Iterator[str]:
    """A fresh cgroup under ``root`` whose processes (threads included) number at most
    ``pids`` (0: no limit), named for gVisor (:data:`GVISOR_PREFIX`) if ``gvisor``, and
    then bounding the host tasks gVisor runs behind that many (gVisor's kernel counts the
    steps' own, see the build's ``nproc``); yields the engine's ``cgroupparent`` for it,
    and removes it afterwards (with any left by a build that ended before its steps did)."""
    token = (GVISOR_PREFIX if gvisor else "") + secrets.token_hex(8)
    if gvisor and pids:
        pids = GVISOR_BASE_TASKS + GVISOR_TASKS_PER_TASK * pids
    directory = root / token
    try:
        root.mkdir(exist_ok=True)
        if (root.parent / "cgroup.subtree_control").exists():  # v2: hand pids down
            _enable_pids(root.parent)
            _enable_pids(root)
        directory.mkdir()
        (directory / "pids.max").write_text(f"{pids or 'max'}\n")
    except OSError as exc:
        with contextlib.suppress(OSError):
            directory.rmdir()
        raise EngineError(
            f"cannot make the build's cgroup {directory} ({exc.strerror})" + _NO_LIMIT_HINT
        ) from None
    try:
        yield f"/{BUILD_CGROUP_ROOT}/{token}"
    finally:
        # The engine makes the parent in every hierarchy (cgroup v1 has one per
        # controller), and removes a step's cgroup a moment after the step's container.
        roots = _hierarchy_roots(root)
        deadline = time.monotonic() + REMOVE_WAIT_S
        while not all([_remove(r / token) for r in roots]) and time.monotonic() < deadline:
            time.sleep(0.1)
        for each in roots:
            _remove_stale(each)


def _hierarchy_roots(pids: Path) -> list[Path]:
    """The builds' directory in every mounted cgroup hierarchy (``pids`` among them)."""
    roots = {pids}
    for part in psutil.disk_partitions(all=True):
        if part.fstype in ("cgroup", "cgroup2"):
            candidate = Path(part.mountpoint) / BUILD_CGROUP_ROOT
            if candidate.is_dir():
                roots.add(candidate)
    return sorted(roots)


def _enable_pids(directory: Path) -> None:
    control = directory / "cgroup.subtree_control"
    if "pids" not in control.read_text().split():
        control.write_text("+pids\n")


def _remove(directory: Path) -> bool:
    """Remove a build's cgroup and its steps' (a step still running keeps its own); whether
    it is gone."""
    for parent, subdirectories, _files in os.walk(directory, topdown=False):
        for name in subdirectories:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(parent, name))
    try:
        directory.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _remove_stale(root: Path) -> None:
    """Remove what builds that outlived any build time left (a service killed mid-build)."""
    cutoff = time.time() - STALE_AFTER_S
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            if entry.is_dir(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                _remove(Path(entry.path))
