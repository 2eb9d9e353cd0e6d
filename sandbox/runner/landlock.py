"""Hide every other process's ``/proc`` entries from this process and its descendants.

A candidate's program runs next to the judge's processes, in the same PID
namespace: ``/proc/PID/cmdline`` is world-readable in Linux (it is how ``ps``
works), so a test command such as ``[ "$out" = "EXPECTED" ]``, or any program
it starts with the expected value among its arguments, would hand the answer
to the candidate. A PID namespace with a /proc of its own is out of reach in a
container (creating one needs CAP_SYS_ADMIN; Docker's seccomp profile refuses
the user namespace that would give it), and so is ``hidepid`` (a remount).
Landlock is not: an unprivileged process with no_new_privs may restrict itself.

:func:`hide_other_processes` restricts opening files for reading to everything
under ``/`` but ``/proc``, the entries of ``/proc`` that describe no process
(``cpuinfo``, ``meminfo``, ``sys`` ...) and this process's own ``/proc/PID``.
Other processes' ``cmdline``, ``environ``, ``status``, ``maps`` ... cannot be
opened; Landlock also refuses ptrace-mode access (``/proc/PID/fd``, ``mem``,
``environ``) from inside the domain to any process outside it, of any uid.
Nothing else changes: writes, directory listings, execution, and (from ABI 2,
by handling and granting ``REFER`` everywhere) renames and links across
directories are as before; under ABI 1 those fail with EXDEV.
A child of the restricted process cannot open its *own* ``/proc/self`` files
(its directory came after the rules).

Under gVisor, and on kernels without Landlock, it does nothing and says so.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import struct

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on every arch
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
ACCESS_FS_READ_FILE = 1 << 2
ACCESS_FS_REFER = 1 << 13
"""ABI 2 (directories only). Unhandled, Landlock refuses renames and links across directories."""
PR_SET_NO_NEW_PRIVS = 38
_PROCESS_LINKS = ("self", "thread-self")


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (gVisor, older kernels)."""
    version = _libc().syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION)
    if version < 0 and ctypes.get_errno() in (errno.ENOSYS, errno.EOPNOTSUPP):
        return 0
    return _check(version, "landlock_create_ruleset")


def _readable_roots() -> list[str]:
    """Every path whose files stay readable: / but /proc, /proc's non-process entries, self."""
    roots = [f"/{name}" for name in os.listdir("/") if name != "proc"]
    for name in os.listdir("/proc"):
        path = f"/proc/{name}"
        if name.isdigit() or name in _PROCESS_LINKS or os.path.islink(path):
            continue  # a process, or a link into one (/proc/net, /proc/mounts: into self)
        roots.append(path)
    roots.append(f"/proc/{os.getpid()}")
    return roots


def hide_other_processes() -> bool:
    """Restrict this process (and what it starts) as the module says; False if unsupported."""
    if abi_version() == 0:
        return False
    libc = _libc()
    access = ACCESS_FS_READ_FILE | (ACCESS_FS_REFER if abi_version() >= 2 else 0)
    attr = struct.pack("=Q", access)  # handled_access_fs: the ABI 1 layout
    ruleset = _check(
        libc.syscall(SYS_CREATE_RULESET, attr, len(attr), 0), "landlock_create_ruleset"
    )
    try:
        for root in _readable_roots():
            try:
                fd = os.open(root, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a dangling link, or an entry that went away
            try:
                allowed = access if stat.S_ISDIR(os.fstat(fd).st_mode) else ACCESS_FS_READ_FILE
                rule = struct.pack("=Qi", allowed, fd)  # path_beneath_attr, packed
                _check(libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, rule, 0), root)
            finally:
                os.close(fd)
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return True
