"""Whether the host's OOM killer struck a container, from its memory cgroup (cgroup v1).

Under gVisor the host's OOM killer, at the container's memory limit, takes the
Sentry and with it the whole sandbox. Docker's ``oom`` event says so only when
it reaches the engine before the dead container is removed (``auto_remove``):
often, not always. The kernel's own record does not race: a container's
:class:`OomRecord` registers an eventfd on its cgroup's ``memory.oom_control``
(``cgroup.event_control``), which the kernel signals once per OOM in that cgroup
and once more when the cgroup is removed. Counted after the container is lost,
one signal with the cgroup gone is the removal alone; anything more, or a signal
while the cgroup still exists (no process has left it yet), is an OOM.

Needs the Docker host's ``/proc`` and ``/sys/fs/cgroup`` and root (the service
runs on the Docker host); elsewhere, or under cgroup v2, :func:`watch_oom` returns
None and Docker's event is the only evidence.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

CGROUP_V1_MEMORY = "/sys/fs/cgroup/memory"
# How long a removed cgroup's own signal may take to arrive (the kernel sends it from
# a work queue once the directory is gone).
REMOVAL_SIGNAL_WAIT_S = 1.0


class OomRecord:
    """The kernel's count of OOM notifications of one container's memory cgroup."""

    def __init__(self, cgroup_dir: str, eventfd: int) -> None:
        self.cgroup_dir = cgroup_dir
        self._eventfd: int | None = eventfd
        self._signals = 0

    def _read(self) -> None:
        if self._eventfd is None:
            return
        with contextlib.suppress(BlockingIOError):
            self._signals += os.eventfd_read(self._eventfd)

    async def oom_killed(self) -> bool:
        """Whether the kernel reported an OOM in the cgroup (call once the container is lost)."""
        deadline = time.monotonic() + REMOVAL_SIGNAL_WAIT_S
        while True:
            self._read()
            if self._signals >= 2:
                return True
            if os.path.isdir(self.cgroup_dir):
                return self._signals == 1  # the cgroup lives: any signal was an OOM
            # Removed: one signal is (or will be) the removal's; an OOM's makes two.
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.02)

    def close(self) -> None:
        """Stop counting (the kernel drops the registration with the descriptor)."""
        if self._eventfd is not None:
            os.close(self._eventfd)
            self._eventfd = None


def memory_cgroup_of(pid: int) -> str | None:
    """The cgroup v1 memory directory of host process ``pid`` (None under v2 or unseen)."""
    try:
        with open(f"/proc/{pid}/cgroup") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            directory = os.path.join(CGROUP_V1_MEMORY, path.lstrip("/"))
            return directory if os.path.isdir(directory) else None
    return None


def watch_oom(pid: int) -> OomRecord | None:
    """Start counting the OOM notifications of the memory cgroup of host process ``pid``."""
    directory = memory_cgroup_of(pid)
    if directory is None:
        return None
    eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    try:
        control = os.open(os.path.join(directory, "memory.oom_control"), os.O_RDONLY)
        try:
            with open(os.path.join(directory, "cgroup.event_control"), "w") as events:
                events.write(f"{eventfd} {control}")
        finally:
            os.close(control)
    except OSError:
        os.close(eventfd)
        return None
    return OomRecord(directory, eventfd)
