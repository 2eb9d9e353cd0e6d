"""Return a container to a clean state between two executions, and prove it.

Every process of the untrusted uid is killed first, so nothing can race the
rest. Then the runner (root with DAC_OVERRIDE and FOWNER, never following a
link: the deletion walks directory file descriptors) empties the writable
directories and restores their modes; a child running as the untrusted uid
removes that uid's System V IPC objects when there are any. Finally the runner
checks that no process is left, every directory is empty and moded as at
start, and no IPC object remains.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

from . import procs

if TYPE_CHECKING:
    from typing import Any

IPC_RMID = 0
_IPC_TABLES = {"shm": "shmctl", "sem": "semctl", "msg": "msgctl"}


class WritableDir:
    """A directory the untrusted uid may write, with the owner and mode it must keep."""

    def __init__(self, spec: str) -> None:
        path, _, mode = spec.partition(":")
        self.path = path
        self.mode = int(mode, 8) if mode else None

    def __repr__(self) -> str:
        return f"WritableDir({self.path!r})"


def reset(uid: int, gid: int, dirs: list[WritableDir]) -> dict[str, Any]:
    """Kill, wipe and verify; returns ``{"clean": bool, "problems": [...]}``."""
    problems: list[str] = []
    survivors = procs.kill_all(uid)
    if survivors:
        problems.append(f"processes of uid {uid} survived SIGKILL: {survivors}")
    else:
        for directory in dirs:
            try:
                _empty(directory)
            except OSError as exc:
                problems.append(f"could not empty {directory.path}: {exc}")
        if _ipc_objects(uid):
            error = _remove_ipc_as(uid, gid)
            if error:
                problems.append(error)
    problems.extend(verify(uid, dirs))
    return {"clean": not problems, "problems": problems}


def verify(uid: int, dirs: list[WritableDir]) -> list[str]:
    """Everything that is not as it was at start; empty when the container is clean."""
    problems = []
    left = procs.processes_of(uid)
    if left:
        problems.append(f"processes of uid {uid} still present: {[pid for pid, _ in left]}")
    for directory in dirs:
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
    for table, _ in _ipc_objects(uid):
        problems.append(f"System V IPC {table} object of uid {uid} left")
        break
    return problems


def _remove_ipc_as(uid: int, gid: int) -> str | None:
    """Fork a child that drops to ``uid`` (the owner) and removes its IPC objects."""
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


def _empty(directory: WritableDir) -> None:
    """Delete everything below ``directory`` without following links; restore its mode."""
    if directory.mode is not None:
        os.chmod(directory.path, directory.mode, follow_symlinks=False)
    fd = os.open(directory.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _empty_fd(fd)
    finally:
        os.close(fd)


def _empty_fd(dir_fd: int) -> None:
    """Delete every entry of the directory open as ``dir_fd``, recursing through fds only."""
    for name in os.listdir(dir_fd):
        try:
            os.unlink(name, dir_fd=dir_fd)
            continue
        except IsADirectoryError:
            pass
        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
        try:
            _empty_fd(child)
        finally:
            os.close(child)
        os.rmdir(name, dir_fd=dir_fd)


def _ipc_objects(uid: int) -> list[tuple[str, int]]:
    """``(table, id)`` of System V IPC objects owned by ``uid``."""
    found = []
    for table in _IPC_TABLES:
        try:
            with open(f"/proc/sysvipc/{table}") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        header = lines[0].split()
        id_col, uid_col = header.index(_id_column(table)), header.index("uid")
        for line in lines[1:]:
            fields = line.split()
            if int(fields[uid_col]) == uid:
                found.append((table, int(fields[id_col])))
    return found


def _id_column(table: str) -> str:
    return {"shm": "shmid", "sem": "semid", "msg": "msqid"}[table]


def _remove_ipc(uid: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for table, ident in _ipc_objects(uid):
        function = getattr(libc, _IPC_TABLES[table])
        if table == "sem":
            function(ident, 0, IPC_RMID)
        else:
            function(ident, IPC_RMID, None)
