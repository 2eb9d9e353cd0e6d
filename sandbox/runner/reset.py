"""Return a container to a clean state between two executions, and prove it.

Every process of the untrusted uids is killed first, so nothing can race the
rest. Then the runner (root with DAC_OVERRIDE and FOWNER) empties the writable
directories without ever following a link: it works on directory descriptors,
and flattens deep trees by moving subdirectories up instead of recursing, so
no depth of nesting exhausts descriptors or the stack. Directory modes are
restored. System V IPC objects created or owned by an untrusted uid are
removed by a child running as that uid (only the owner or creator may). Finally
the runner checks that no process is left, every directory is empty and moded
as at start, and no IPC object remains. Under gVisor (``--memory``) it also checks
that the sandbox kernel has given back the memory of what ran: a sandbox still
holding more than half its limit would stop the next program at once, so it is
reported unclean (and replaced).
"""

from __future__ import annotations

import itertools
import os
import stat
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from . import procs

if TYPE_CHECKING:
    from typing import Any

    from .config import Config, WritableDir

IPC_RMID = 0
_IPC_TABLES = {"shm": ("shmid", "shmctl"), "sem": ("semid", "semctl"), "msg": ("msqid", "msgctl")}
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
# How long gVisor may take to give back the memory of killed processes.
MEMORY_RELEASE_WAIT_S = 2.0


def reset(
    config: Config,
    kill_at_once: Callable[[], None] | None = None,
    memory_bytes: Callable[[], int | None] | None = None,
    *,
    none_left: bool = False,
) -> dict[str, Any]:
    """Kill, wipe and verify; returns ``{"clean": bool, "problems": [...]}``.

    ``memory_bytes`` reads the sandbox's memory count (checked under ``--memory``).
    ``none_left``: the caller's last scan found no process of the untrusted uids and
    nothing has run as them since, so the kill is skipped (the verification still scans).
    """
    problems: list[str] = []
    survivors = []
    if not none_left:
        survivors = procs.kill_all(config.untrusted_uids, kill_at_once=kill_at_once)
    if survivors:
        problems.append(f"processes of the untrusted uids survived SIGKILL: {survivors}")
    if not problems:
        for directory in config.dirs:
            try:
                _empty(directory)
            except OSError as exc:
                problems.append(f"could not empty {directory.path}: {exc}")
        owners = {uid for _, uid in _ipc_objects(config.untrusted_uids)}
        for uid, gid in config.ids.values():
            if uid in owners:
                error = _remove_ipc_as(uid, gid)
                if error:
                    problems.append(error)
    problems.extend(verify(config))
    if config.memory_bytes is not None and memory_bytes is not None:
        problems.extend(_memory_left(config.memory_bytes, memory_bytes))
    return {"clean": not problems, "problems": problems}


def _memory_left(limit: int, memory_bytes: Callable[[], int | None]) -> list[str]:
    """A problem when the sandbox's memory count stays above half ``limit`` (gVisor)."""
    deadline = time.monotonic() + MEMORY_RELEASE_WAIT_S
    while True:
        used = memory_bytes()
        if used is None or used <= limit // 2:
            return []
        if time.monotonic() >= deadline:
            return [f"{used >> 20} MB of memory still in use of the limit's {limit >> 20} MB"]
        time.sleep(0.05)


def verify(config: Config) -> list[str]:
    """Everything that is not as it was at start; empty when the container is clean."""
    problems = []
    left = procs.processes_of(config.untrusted_uids)
    if left:
        problems.append(f"untrusted processes still present: {[pid for pid, _ in left]}")
    if _ipc_objects(config.untrusted_uids):
        problems.append("System V IPC objects of the untrusted uids left")
    for directory in config.dirs:
        try:
            entries = os.listdir(directory.path)
            info = os.stat(directory.path, follow_symlinks=False)
        except OSError as exc:
            problems.append(f"{directory.path}: {exc.strerror}")
            continue
        if entries:
            problems.append(f"{directory.path} not empty: {sorted(entries)[:5]}")
        if directory.mode is not None and stat.S_IMODE(info.st_mode) != directory.mode:
            problems.append(f"{directory.path} mode is {oct(stat.S_IMODE(info.st_mode))}")
    return problems


def _empty(directory: WritableDir) -> None:
    """Delete everything below ``directory`` with two descriptors at most; restore its mode."""
    if directory.mode is not None:
        os.chmod(directory.path, directory.mode, follow_symlinks=False)
    top = os.open(directory.path, _DIR_FLAGS)
    names = itertools.count()
    try:
        while entries := os.listdir(top):
            for name in entries:
                try:
                    os.unlink(name, dir_fd=top)
                    continue
                except IsADirectoryError:
                    pass
                _hoist_children(top, name, names)
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)


def _hoist_children(top: int, name: str, names: itertools.count[int]) -> None:
    """Delete the files of ``top/name`` and move its subdirectories up into ``top``."""
    inner = os.open(name, _DIR_FLAGS, dir_fd=top)
    try:
        for entry in os.listdir(inner):
            try:
                os.unlink(entry, dir_fd=inner)
            except IsADirectoryError:
                os.rename(
                    entry, f".reset-{os.getpid()}-{next(names)}", src_dir_fd=inner, dst_dir_fd=top
                )
    finally:
        os.close(inner)


def _ipc_objects(uids: Collection[int]) -> list[tuple[tuple[str, int], int]]:
    """``((table, id), uid)`` of System V IPC objects one of ``uids`` owns or created."""
    found = []
    for table, (id_column, _) in _IPC_TABLES.items():
        try:
            lines = procs.read_small(f"/proc/sysvipc/{table}").splitlines()
        except OSError:
            continue
        if not lines:
            continue
        header = lines[0].split()
        columns = [header.index(id_column), header.index("uid"), header.index("cuid")]
        for line in lines[1:]:
            ident, owner, creator = (int(line.split()[i]) for i in columns)
            for uid in uids:
                if uid in (owner, creator):
                    found.append(((table, ident), uid))
    return found


def _remove_ipc_as(uid: int, gid: int) -> str | None:
    """Fork a child that drops to ``uid`` (owner or creator) and removes its IPC objects.

    Every process of that uid is dead by now, and the child runs nothing but this.
    """
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            _remove_ipc(uid)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return None if status == 0 else f"removing System V IPC objects failed ({status})"


def _remove_ipc(uid: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for (table, ident), _ in _ipc_objects([uid]):
        function = getattr(libc, _IPC_TABLES[table][1])
        if table == "sem":
            function(ident, 0, IPC_RMID)
        else:
            function(ident, IPC_RMID, None)
