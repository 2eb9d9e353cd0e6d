"""A small seccomp filter for untrusted code under gVisor (the runner's ``--runtime runsc``).

Under runc, Docker's default seccomp profile and the container's rlimits stand
between untrusted code and the host kernel. gVisor applies neither the profile
(its Sentry is the kernel the code talks to) nor every rlimit, and a few things
the security model relies on do not hold there without help:

- POSIX message queues: gVisor implements ``mq_open`` but refuses to set
  RLIMIT_MSGQUEUE, the limit that keeps untrusted code from creating queues
  under runc; a queue would outlive the reset, which cannot list queues.
  Refused with ENOSYS, as on a kernel built without them.
- System V IPC: gVisor has no ``/proc/sysvipc``, so the reset could neither
  find nor remove segments, semaphore sets and message queues. ENOSYS.
- Namespaces: gVisor lets an unprivileged process create a user namespace (and
  inside it mount, network ... namespaces); Docker's profile refuses
  ``unshare``, ``setns`` and ``clone`` with namespace flags. EPERM. ``clone3``,
  whose flags a filter cannot see, gets ENOSYS (libc then uses ``clone``),
  as under Docker's profile.
- Device nodes: gVisor lets any uid ``mknod`` character and block devices in a
  tmpfs (runc: no CAP_MKNOD). EPERM; FIFOs and regular files stay allowed.

Every other system call is allowed. Calls through another ABI (i386, x32) get
ENOSYS; gVisor implements none of them.
"""

from __future__ import annotations

import ctypes
import errno
import os

PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ, _JGE, _JSET = 0x15, 0x35, 0x45  # BPF_JMP | BPF_{JEQ,JGE,JSET} | BPF_K
_JA = 0x05  # BPF_JMP | BPF_JA: jump by k
_AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR, _ARCH = 0, 4


def _arg(index: int) -> int:
    return 16 + 8 * index  # the low 32 bits (little-endian)


_X32_BIT = 0x40000000
_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET}
_S_IFMT, _S_IFCHR, _S_IFBLK = 0o170000, 0o020000, 0o060000

# AUDIT_ARCH and system call numbers of the architectures images are built for.
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "mq_open": 240,
            "shmget": 29,
            "semget": 64,
            "msgget": 68,
            "clone3": 435,
            "unshare": 272,
            "setns": 308,
            "clone": 56,
            "mknod": 133,
            "mknodat": 259,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "mq_open": 180,
            "shmget": 194,
            "semget": 190,
            "msgget": 186,
            "clone3": 435,
            "unshare": 97,
            "setns": 268,
            "clone": 220,
            "mknodat": 33,
        },
    ),
}
_UNAVAILABLE = ("mq_open", "shmget", "semget", "msgget", "clone3")  # ENOSYS
_REFUSED = ("unshare", "setns")  # EPERM


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as ``(code, jt, jf, k)`` instructions for ``machine`` (default: this one)."""
    audit_arch, numbers = _ARCHES[machine or os.uname().machine]
    # Written with named jump targets (forward only, as BPF requires), resolved below.
    code: list[str | tuple[int, int | str, int | str, int | str]] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ, 0, "enosys", audit_arch),
        (_LD_W_ABS, 0, 0, _NR),
        (_JGE, "enosys", 0, _X32_BIT),
    ]
    code += [(_JEQ, "enosys", 0, numbers[name]) for name in _UNAVAILABLE]
    code += [(_JEQ, "eperm", 0, numbers[name]) for name in _REFUSED]
    code.append((_JEQ, "clone", 0, numbers["clone"]))
    if "mknod" in numbers:
        code.append((_JEQ, "mknod", 0, numbers["mknod"]))
    code.append((_JEQ, "mknodat", 0, numbers["mknodat"]))
    code.append((_RET, 0, 0, _ALLOW))
    code += ["clone", (_LD_W_ABS, 0, 0, _arg(0)), (_JSET, "eperm", 0, _NAMESPACE_FLAGS)]
    code.append((_RET, 0, 0, _ALLOW))
    if "mknod" in numbers:
        code += ["mknod", (_LD_W_ABS, 0, 0, _arg(1)), (_JA, 0, 0, "device")]
    code += ["mknodat", (_LD_W_ABS, 0, 0, _arg(2))]
    code += ["device", (_AND, 0, 0, _S_IFMT), (_JEQ, "eperm", 0, _S_IFCHR)]
    code += [(_JEQ, "eperm", 0, _S_IFBLK), (_RET, 0, 0, _ALLOW)]
    code += ["enosys", (_RET, 0, 0, _ERRNO | errno.ENOSYS)]
    code += ["eperm", (_RET, 0, 0, _ERRNO | errno.EPERM)]
    labels: dict[str, int] = {}
    position = 0
    for item in code:
        if isinstance(item, str):
            labels[item] = position
        else:
            position += 1
    resolved: list[tuple[int, int, int, int]] = []
    for item in code:
        if isinstance(item, str):
            continue
        op, *fields = item
        here = len(resolved)
        jt, jf, k = (labels[f] - here - 1 if isinstance(f, str) else f for f in fields)
        if not (0 <= jt < 256 and 0 <= jf < 256 and k >= 0):
            raise ValueError("seccomp filter: jump out of range")
        resolved.append((op, jt, jf, k))
    return resolved


def install() -> None:
    """Confine the calling process (and everything it execs or forks) for good."""
    instructions = _PROGRAM if _PROGRAM is not None else program()  # unknown arch: raises
    array = (_SockFilter * len(instructions))(*(_SockFilter(*i) for i in instructions))
    fprog = _SockFprog(len(instructions), array)
    libc = ctypes.CDLL(None, use_errno=True)
    # Required to install a filter without CAP_SYS_ADMIN (Docker sets it already).
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")


# Built once, before the zygote forks anything.
_PROGRAM = program() if os.uname().machine in _ARCHES else None
