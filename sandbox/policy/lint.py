"""Policy lint: warnings about settings that are legal but worth a second look."""

from __future__ import annotations

from .keys import _show
from .limits import (
    LINT_MIN_PIDS,
    LINT_PYTHON_MIN_MEMORY_MB,
    LINT_WALL_CPU_RATIO,
    PROTECTED_ENV_NAMES,
)
from .model import Policy


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
