"""Find and kill every process of the untrusted uids inside the container (one /proc scan);
in a root session, every process but the runner's own."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Collection

# Processes that can never be one of the untrusted uids': the namespace's init (pid 1,
# started before anything else), the runner and the zygote (the runner's own child: its
# pid stays taken, as a zombie, even if it died). The runner adds the last two.
_TRUSTED = {"1"}


def trust(pid: int) -> None:
    """Leave ``pid`` (the runner's own, or its zygote's) out of every scan."""
    _TRUSTED.add(str(pid))


def read_small(path: str) -> str:
    """A small file (of /proc), read with plain system calls: no buffering, tty or seek
    probes (three calls fewer than ``open``, on every file of every scan)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def processes_of(
    uids: Collection[int] | None, *, spared: Collection[int] = ()
) -> list[tuple[int, str]]:
    """``(pid, state)`` of every process whose real, effective or saved uid is in ``uids``
    (``None``: of any uid, for a root session's leftovers, whose uid 0 is the runner's).

    The processes of :func:`trust` and ``spared`` are not read.
    """
    found = []
    skipped = _TRUSTED | {str(pid) for pid in spared}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or entry in skipped:
            continue
        try:
            status = read_small(f"/proc/{entry}/status")
        except OSError:
            continue  # exited while we looked
        state = ""
        uids_of_process: list[int] = []
        for line in status.splitlines():
            if line.startswith("State:"):
                state = line.split()[1]
            elif line.startswith("Uid:"):
                uids_of_process = [int(value) for value in line.split()[1:4]]
                break
        if uids is None or any(uid in uids for uid in uids_of_process):
            found.append((int(entry), state))
    return found


def kill_all(
    uids: Collection[int] | None,
    *,
    deadline_s: float = 3.0,
    kill_at_once: Callable[[], None] | None = None,
    spared: Collection[int] = (),
) -> list[int]:
    """SIGKILL every process of ``uids`` (see :func:`processes_of`) until none is left
    (zombies must be reaped too: the zygote reaps its children, init the orphans).

    While processes run, ``kill_at_once`` is called first in each round: it signals
    every process of the uids in one go, so that nothing forks faster than we scan
    (a fork bomb; under gVisor a scan of /proc takes long).

    Returns the pids still present when the deadline passed (empty on success).
    """
    end = time.monotonic() + deadline_s
    delay = 0.0005
    while True:
        alive = processes_of(uids, spared=spared)
        if not alive:
            return []
        if kill_at_once is not None and any(state != "Z" for _, state in alive):
            kill_at_once()
        for pid, state in alive:
            if state != "Z":
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if time.monotonic() > end:
            return [pid for pid, _ in alive]
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
