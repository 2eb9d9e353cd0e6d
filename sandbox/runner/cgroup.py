"""Read the container's own cgroup counters (v1 or v2): CPU time, memory, OOM kills.

Under gVisor there is no cgroup file inside the sandbox; its kernel is the
sandbox's own, so ``/proc/meminfo`` tells the memory the whole sandbox uses and
stands in for the memory counter. CPU time and OOM kills have no stand-in there
(RLIMIT_CPU and the wall limit still hold; an OOM takes the whole sandbox).
"""

from __future__ import annotations

import os

_ROOT = "/sys/fs/cgroup"
_MEMINFO = "/proc/meminfo"


class Cgroup:
    """Counters of the cgroup the runner lives in; every reader returns None when unavailable.

    The files are opened once and re-read with ``pread`` at offset 0, which makes
    the kernel regenerate their content: one system call per reading.
    """

    def __init__(self, root: str = _ROOT, *, gvisor: bool = False) -> None:
        v2 = os.path.exists(os.path.join(root, "cgroup.controllers"))

        def path(v1_controller: str, name: str) -> str:
            return os.path.join(root, name) if v2 else os.path.join(root, v1_controller, name)

        self.v2 = v2
        self._cpu = _open(path("cpu", "cpu.stat") if v2 else path("cpuacct", "cpuacct.usage"))
        self._memory = _open(path("memory", "memory.current" if v2 else "memory.usage_in_bytes"))
        self._oom = _open(path("memory", "memory.events" if v2 else "memory.oom_control"))
        # Outside gVisor /proc/meminfo is the host's: no stand-in for the cgroup then.
        self._meminfo = _open(_MEMINFO) if gvisor and self._memory is None else None

    def cpu_seconds(self) -> float | None:
        """Total CPU time used by the whole container so far."""
        if self.v2:
            usec = _field(_pread(self._cpu), "usage_usec")
            return None if usec is None else usec / 1e6
        text = _pread(self._cpu)
        return None if text is None else int(text) / 1e9

    def memory_bytes(self) -> int | None:
        """Memory currently charged to the container (processes, tmpfs, page cache)."""
        text = _pread(self._memory)
        if text is not None:
            return int(text)
        meminfo = _pread(self._meminfo)
        if meminfo is None:
            return None
        fields = {}
        for line in meminfo.splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.split()
        try:
            return (int(fields["MemTotal"][0]) - int(fields["MemAvailable"][0])) * 1024
        except (KeyError, IndexError, ValueError):
            return None

    def oom_kills(self) -> int | None:
        """How many processes the kernel's OOM killer has killed in this cgroup."""
        return _field(_pread(self._oom), "oom_kill")


def _open(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _pread(fd: int | None) -> str | None:
    if fd is None:
        return None
    try:
        return os.pread(fd, 4096, 0).decode()
    except OSError:
        return None


def _field(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return int(value)
    return None
