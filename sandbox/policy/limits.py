"""Named bounds and defaults of every policy setting, and the paths policies may not touch.

The table in policies/README.md is derived from these; a unit test checks that the two agree.
"""

from __future__ import annotations

import re
from typing import Final

MOUNT_ALLOWLIST_ENV: Final = "SANDBOX_MOUNT_ALLOWLIST"
"""Environment variable: ``os.pathsep``-separated host roots that mounts may come from."""

MAX_POLICY_BYTES: Final = 64 * 1024
MAX_EXTENDS_DEPTH: Final = 8
MAX_YAML_NESTING: Final = 16
POLICY_SUFFIXES: Final = (".yaml", ".yml")
MAX_POLICY_NAME_LEN: Final = 64
POLICY_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

MIN_CPUS: Final = 0.05
MAX_CPUS: Final = 64.0
DEFAULT_CPUS: Final = 1.0
MIN_MEMORY_MB: Final = 16
MAX_MEMORY_MB: Final = 65536
DEFAULT_MEMORY_MB: Final = 512
SWAP_MB: Final = 0  # the only accepted value: swap stays off
MIN_PIDS: Final = 8
MAX_PIDS: Final = 4096
DEFAULT_PIDS: Final = 128
MIN_TIME_S: Final = 0.1
MAX_TIME_S: Final = 3600.0
DEFAULT_WALL_TIME_S: Final = 10.0
DEFAULT_CPU_TIME_S: Final = 10.0
DEFAULT_COMPILE_TIME_S: Final = 30.0
MIN_OUTPUT_BYTES: Final = 1
MAX_OUTPUT_BYTES: Final = 64 * 1024 * 1024
DEFAULT_OUTPUT_BYTES: Final = 1024 * 1024
MIN_OPEN_FILES: Final = 16
MAX_OPEN_FILES: Final = 65536
DEFAULT_OPEN_FILES: Final = 256
MIN_FILE_SIZE_MB: Final = 1
MAX_FILE_SIZE_MB: Final = 4096
DEFAULT_FILE_SIZE_MB: Final = 64

MIN_TMPFS_MB: Final = 1
MAX_TMPFS_MB: Final = 8192
MIN_TMPFS_INODES: Final = 16
MAX_TMPFS_INODES: Final = 4_000_000
DEFAULT_TMPFS_MB: Final = 64
DEFAULT_TMPFS_INODES: Final = 8192
MIN_SHM_MB: Final = 1
MAX_SHM_MB: Final = 4096
DEFAULT_SHM_MB: Final = 16
MAX_EXTRA_TMPFS: Final = 8
MAX_MOUNTS: Final = 16
MAX_PATH_LEN: Final = 4096

MIN_UID: Final = 1000
MAX_UID: Final = 2**31 - 2
DEFAULT_UID: Final = 10001
DEFAULT_GID: Final = 10001
DEFAULT_JUDGE_UID: Final = 10002
DEFAULT_JUDGE_GID: Final = 10002

MAX_ENV_VARS: Final = 256
MAX_ENV_NAME_LEN: Final = 128
MAX_ENV_VALUE_LEN: Final = 4096
ENV_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

MIN_POOL_WARM: Final = 0
MAX_POOL_WARM: Final = 64
DEFAULT_POOL_WARM: Final = 2
MIN_POOL_MAX: Final = 1
MAX_POOL_MAX: Final = 256
DEFAULT_POOL_MAX: Final = 8
MIN_MAX_USES: Final = 1
MAX_MAX_USES: Final = 100_000
DEFAULT_MAX_USES: Final = 100
MIN_SESSION_TTL_S: Final = 5.0
MAX_SESSION_TTL_S: Final = 86400.0
DEFAULT_SESSION_TTL_S: Final = 600.0

NETWORK_MODES: Final = ("none", "allowlist")
MAX_ALLOW_RULES: Final = 256
HOSTNAME_RE: Final = re.compile(
    r"(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
RUNTIMES: Final = ("runc", "runsc")

WORKSPACE_PATH: Final = "/workspace"
TMP_PATH: Final = "/tmp"
RUNNER_PATH: Final = "/opt/sandbox"
JUDGE_PATH: Final = "/judge"
RESERVED_TARGETS: Final = (WORKSPACE_PATH, TMP_PATH, RUNNER_PATH, JUDGE_PATH)
"""Container paths the platform owns: nothing may be mounted at, above or below them."""
FORBIDDEN_TARGET_ROOTS: Final = ("/proc", "/sys", "/dev")
CONTAINER_SYSTEM_DIRS: Final = (
    "/etc",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/boot",
    "/run",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
    "/usr/libexec",
    "/usr/include",
    "/usr/share",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/usr/local/lib",
    "/usr/local/libexec",
    "/usr/local/share",
    "/var/lib",
    "/var/run",
)
"""Container paths of the system's programs, libraries and settings: a writable tmpfs is
never mounted at, above or below them (the sandbox user could put programs or settings
there that root would use)."""
DOCKER_SOCKET_PATHS: Final = ("/var/run/docker.sock", "/run/docker.sock")
SYSTEM_PATHS: Final = (
    "/",
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/root",
    "/run",
    "/var/run",
    "/var/lib/docker",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/var",
    "/home",
)
"""Host paths that are never a mount source, nor is any ancestor of them."""
NO_DESCENDANT_SOURCES: Final = (
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/root",
    "/run",
    "/var/run",
    "/var/lib/docker",
)
"""Host paths whose whole subtree is refused as a mount source."""
MOUNTINFO: Final = "/proc/self/mountinfo"
"""Where the mount points below a mount source are looked up."""

PROTECTED_ENV_NAMES: Final = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "NODE_OPTIONS",
        "PERL5OPT",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "RUBYOPT",
    }
)
"""Interpreter start-up hooks a request may never pass through (``env.allow``)."""

# Lint thresholds (warnings only).
LINT_WALL_CPU_RATIO: Final = 4.0
LINT_PYTHON_MIN_MEMORY_MB: Final = 64
LINT_MIN_PIDS: Final = 32
