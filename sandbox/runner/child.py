"""What a forked child does before it becomes untrusted code.

The zygote forks a *spare* ahead of each request (see :func:`serve_as_spare`):
it closes the runner's channel, resets signals and warms itself up, then
waits. Given a request, it applies rlimits, drops to the untrusted uid (losing
every capability), writes the request's files as that uid, then either
``execve``s the command or, on the Python fast path, runs the script in this
already-initialised interpreter with the semantics of ``python3 script.py``.
"""

from __future__ import annotations

import _signal

# Everything the child needs is imported here, before any fork, so that no
# execution pays for an import.
import array  # noqa: F401  (socket's send_fds and recv_fds import it when first called)
import atexit
import base64
import builtins
import contextlib
import fcntl
import importlib.machinery
import io
import json
import marshal
import os
import resource
import signal
import socket
import sys
import types
from typing import TYPE_CHECKING

from . import BASELINE_MODULES, landlock, seccomp
from .config import JUDGE, SANDBOX

if TYPE_CHECKING:
    from typing import Any, NoReturn

    from .config import Config

# Exit code of a child whose set-up failed; the reason travels on the status pipe.
SETUP_FAILED = 126

_DROPPED_MODULES: list[types.ModuleType] = []
# What the zygote had imported that a fresh interpreter has not, and how many modules
# are left without them (see prepare_zygote and _drop_modules).
_ZYGOTE_EXTRA_MODULES: tuple[str, ...] = ()
_FRESH_COUNT = 0
HARNESS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness")
# Plain ints for _signal.signal: signal.signal's enum conversions cost a spare some 70 page
# faults (0.2 ms) on every execution.
_SIGNALS_TO_RESET = tuple(
    int(s) for s in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)
)
_SIGPIPE, _SIGINT = int(signal.SIGPIPE), int(signal.SIGINT)


# Environment variables the fast path honours itself; any other PYTHON* variable
# changes interpreter start-up, so such a request takes the exec path instead.
_FAST_PATH_PYTHON_VARS = frozenset({"PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"})


class Spec:
    """What one child must become; decoded by the child itself from the request."""

    def __init__(self, request: dict[str, Any], config: Config) -> None:
        self.argv: list[str] = request["argv"]
        self.cwd: str = request.get("cwd") or "/workspace"
        self.env: dict[str, str] = request.get("env") or {}
        self.files: list[dict[str, Any]] = request.get("files") or []
        limits = request.get("limits") or {}
        self.cpu_s: float = float(limits.get("cpu_s", 10))
        self.nofile: int = int(limits.get("nofile", 256))
        self.fsize: int = int(limits.get("fsize_bytes", 64 << 20))
        self.python_fast_path: bool = bool(request.get("python_fast_path", True))
        self.role: str = request.get("role") or SANDBOX
        if self.role not in config.role_ids:
            raise ValueError(f"no such role: {self.role!r}")
        self.uid, self.gid = config.role_ids[self.role]
        self.nproc: int | None = config.nproc
        self.gvisor: bool = config.runtime == "runsc"
        self.hide_processes: bool = bool(request.get("hide_processes"))


def python_script(argv: list[str], env: dict[str, str]) -> str | None:
    """The script path if ``argv`` is exactly ``python3 SCRIPT [ARGS...]``, else None."""
    if len(argv) < 2 or os.path.basename(argv[0]) not in ("python3", "python"):
        return None
    if argv[1].startswith("-"):
        return None
    if any(k.startswith("PYTHON") and k not in _FAST_PATH_PYTHON_VARS for k in env):
        return None
    return argv[1]


def serve_as_spare(control_fd: int, status_fd: int, config: Config) -> NoReturn:
    """Body of a pre-forked spare: get ready, wait for one request, become its program.

    fds 0-2 are already the execution's stdin (a memfd) and output pipes. All
    the work that does not depend on the request (and the page faults it
    costs) happens here, before the request arrives. File descriptors sent
    along with the request become fds 3, 4, ... (the judge/candidate socket;
    the judge's report channel). The zygote has made the interpreter's state what
    an execution starts from (:func:`prepare_zygote`). Never returns.
    """
    try:
        os.setsid()
        control_fd, status_fd = _keep_only_above_3(control_fd, status_fd)
        for signum in _SIGNALS_TO_RESET:
            _signal.signal(signum, _signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        _prefer_for_oom_kill()
        _warm_up(config)
        request, passed = _read_request(control_fd)
        if request is None:  # the runner discarded this spare
            os._exit(0)
        status_fd = _place_passed_fds(passed, status_fd)
        spec = Spec(request, config)
        _become(spec, status_fd)
    except BaseException as exc:
        _report_setup_failure(status_fd, exc)
    os._exit(SETUP_FAILED)


def _keep_only_above_3(*fds: int) -> list[int]:
    """Close every fd from 3 up but ``fds``, which move above 3 (fd 3 is for the peer socket)."""
    moved = []
    for fd in fds:
        if fd == 3:
            new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 4)
            os.close(fd)
            fd = new
        moved.append(fd)
    low = 3
    for fd in sorted(moved):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 65536)
    return moved


def _place_passed_fds(passed: list[int], status_fd: int) -> int:
    """Make the descriptors sent with the request fds 3, 4, ... in order, inheritable.

    The judge/candidate socket is one; the judge's report channel is two (its nonce,
    then its report pipe). Returns ``status_fd``, moved if it stood in the way.
    """
    first_free = 3 + len(passed)
    if 3 <= status_fd < first_free:
        moved = fcntl.fcntl(status_fd, fcntl.F_DUPFD_CLOEXEC, first_free)
        os.close(status_fd)
        status_fd = moved
    parked = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, first_free) for fd in passed]
    for fd in passed:
        os.close(fd)
    for target, fd in enumerate(parked, start=3):
        os.dup2(fd, target)  # inheritable
        os.close(fd)
    return status_fd


def _read_request(fd: int) -> tuple[dict[str, Any] | None, list[int]]:
    control = socket.socket(fileno=fd)
    first, passed, _, _ = socket.recv_fds(control, 65536, 4)
    chunks = [first]
    while chunk := control.recv(65536):
        chunks.append(chunk)
    control.close()
    if not first:
        return None, passed
    request: dict[str, Any] = marshal.loads(b"".join(chunks))  # from the runner (see zygote)
    return request, passed


# A request like the runner's (see execute._child_request), for _warm_up to decode.
_SAMPLE_REQUEST = marshal.dumps(
    {
        "op": "exec",
        "argv": ["python3", "main.py"],
        "cwd": "/workspace",
        "env": {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"},
        "files": [{"path": "main.py", "data": "cHJpbnQoMSk=", "mode": 0o644}],
        "limits": {"cpu_s": 10.0, "nofile": 256, "fsize_bytes": 1 << 20},
        "role": SANDBOX,
    }
)


def _warm_up(config: Config) -> None:
    """Walk, before the request, the path a request takes until its program starts.

    Each page a child writes first is a copy-on-write fault (some 4 us here): those of
    decoding the request, building its :class:`Spec` and compiling are paid here, while
    the spare waits, rather than in the request's latency. Only that path: a spare that
    ran a small program here instead (printing 50 lines) spent more CPU than it saved
    (0.09 to 0.85 ms a ``print(1)`` child, p50 of 700, in six like-for-like rounds).
    """
    _walk_request_path(marshal.loads(_SAMPLE_REQUEST), config)


def _walk_request_path(request: dict[str, Any], config: Config) -> None:
    """What a spare does with ``request`` before its program starts, short of doing it."""
    spec = Spec(request, config)
    script = python_script(spec.argv, spec.env)
    for entry in spec.files:
        base64.b64decode(entry["data"])
    if script is not None and not _is_harness(script):
        path = os.path.abspath(script)
        types.ModuleType("__main__").__file__ = path
        importlib.machinery.SourceFileLoader("__main__", path)
        os.path.dirname(path)
    compile("print(1)", "<warm-up>", "exec", dont_inherit=True)


def _prefer_for_oom_kill() -> None:
    """The OOM killer must choose untrusted code, never the runner (os.open: no file object)."""
    fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
    try:
        os.write(fd, b"1000")
    finally:
        os.close(fd)


def _become(spec: Spec, status_fd: int) -> None:
    cpu = max(1, int(spec.cpu_s + 0.999))
    _lower_limit(resource.RLIMIT_CPU, cpu, cpu + 1)
    _lower_limit(resource.RLIMIT_NOFILE, spec.nofile, spec.nofile)
    _lower_limit(resource.RLIMIT_FSIZE, spec.fsize, spec.fsize)
    _lower_limit(resource.RLIMIT_CORE, 0, 0)
    if spec.nproc is not None:  # set as root, so the untrusted uid can never raise it
        _lower_limit(resource.RLIMIT_NPROC, spec.nproc, spec.nproc)
    # No POSIX message queues (they would outlive the execution). gVisor refuses
    # to set this limit; there the seccomp filter refuses mq_open instead.
    with contextlib.suppress(ValueError, OSError):
        _lower_limit(resource.RLIMIT_MSGQUEUE, 0, 0)
    os.setgroups([])
    os.setresgid(spec.gid, spec.gid, spec.gid)
    os.setresuid(spec.uid, spec.uid, spec.uid)
    if os.getresuid() != (spec.uid,) * 3 or os.getresgid() != (spec.gid,) * 3:
        raise PermissionError("could not drop privileges")
    if spec.gvisor:
        seccomp.install()
    if spec.hide_processes:  # a candidate beside the judge: no /proc entry of its processes
        landlock.hide_other_processes()
    # The judge's files (hidden tests) are its own; the candidate's are readable as usual.
    os.umask(0o077 if spec.role == JUDGE else 0o022)
    try:
        os.chdir(spec.cwd)
    except OSError as exc:
        raise _refused("cannot enter the working directory", spec.cwd, exc) from exc
    for entry in spec.files:
        data = base64.b64decode(entry["data"])
        try:
            write_file(entry["path"], data, int(entry.get("mode", 0o644)))
        except OSError as exc:
            raise _refused("cannot write the file", entry["path"], exc) from exc
    script = python_script(spec.argv, spec.env) if spec.python_fast_path else None
    if script is not None:
        os.close(status_fd)
        # A user's script sees the modules of a fresh interpreter; our own harness
        # (judge and candidate server) keeps what the zygote already imported.
        _run_python_main(script, spec.argv[2:], spec.env, fresh_modules=not _is_harness(script))
    _signal.signal(_SIGPIPE, _signal.SIG_DFL)
    _signal.signal(_SIGINT, _signal.SIG_DFL)
    try:
        _exec_search(spec.argv, spec.env)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _refused("cannot run", spec.argv[0], exc) from exc


def _is_harness(script: str) -> bool:
    return os.path.dirname(os.path.abspath(script)) == HARNESS_DIR


def _lower_limit(which: int, soft: int, hard: int) -> None:
    """Set an rlimit, never above the hard limit already in force (only root could raise it)."""
    _, current_hard = resource.getrlimit(which)
    if current_hard != resource.RLIM_INFINITY:
        hard = min(hard, current_hard)
    resource.setrlimit(which, (min(soft, hard), hard))


def _exec_search(argv: list[str], env: dict[str, str]) -> NoReturn:
    """``execvpe`` without os.execvpe's overhead; raises the most telling error on failure."""
    command = argv[0]
    if "/" in command:
        os.execve(command, argv, env)
    error: OSError = FileNotFoundError(2, f"command not found: {command}")
    for directory in env.get("PATH", "/usr/bin:/bin").split(":"):
        try:
            os.execve(os.path.join(directory or ".", command), argv, env)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except PermissionError as exc:
            error = exc
    raise error


class RequestRefused(Exception):
    """The request asks for what its uid may not do (a working directory it cannot
    enter, a file it cannot write, a program it cannot run): the caller's mistake,
    reported as such, never a failure of the sandbox."""


def _refused(what: str, path: str, exc: OSError) -> RequestRefused:
    """``what path: why``, and where on the path it failed when that is elsewhere."""
    where = f" at {exc.filename!r}" if exc.filename not in (None, "", path) else ""
    return RequestRefused(f"{what} {path!r}: {exc.strerror or exc}{where}")


def _report_setup_failure(status_fd: int, exc: BaseException) -> None:
    kind = "setup"
    if isinstance(exc, FileNotFoundError):
        kind = "not_found"
    elif isinstance(exc, RequestRefused):
        kind = "refused"
    message = json.dumps({"kind": kind, "error": f"{type(exc).__name__}: {exc}"}).encode()
    with contextlib.suppress(OSError):
        os.write(status_fd, message[:4000])


def write_file(path: str, data: bytes, mode: int = 0o644) -> None:
    """Create or replace ``path`` (relative to the cwd) as the current, unprivileged uid."""
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode & 0o777)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def prepare_zygote(config: Config) -> None:
    """Once, in the zygote: the state every execution's interpreter starts from.

    The spare's own code already specialised (:func:`_rehearse`). No environment
    (the request's is the program's whole environment), and text
    streams on fds 0-2 configured as the interpreter configures them at start-up,
    made while the zygote's fd 0 is a seekable file and fds 1 and 2 are pipes, as a
    spare's are (a memfd; pipes). Each spare inherits them ready rather than paying
    their page faults itself. The zygote writes nothing to them.
    """
    global _ZYGOTE_EXTRA_MODULES, _FRESH_COUNT
    _rehearse(config)
    os.environ.clear()
    streams = _std_streams()
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams  # type: ignore[misc]
    _ZYGOTE_EXTRA_MODULES = tuple(name for name in sys.modules if name not in BASELINE_MODULES)
    _FRESH_COUNT = len(sys.modules) - len(_ZYGOTE_EXTRA_MODULES)


# Runs of the spare's path in the zygote (see _rehearse): 16 made spares as cheap as 200 did;
# 32 take some 2 ms of the zygote's start.
REHEARSALS = 32


def _rehearse(config: Config) -> None:
    """Run, in the zygote, the parts of a spare's path that change nothing outside it.

    Python 3.11 specialises bytecode in place, where it runs: a function's first runs
    write to its code object (warm-up and adaptive counters, then the specialised
    instructions). Code that only ever ran in spares was specialised anew in each, every
    write a copy-on-write fault on a page of the zygote's code. Rehearsed here, before
    any fork, it is shared by every spare already specialised. Measured in one
    container, three rounds of 700 ``print(1)``: a child's CPU went from 2.5-2.9 ms to
    1.6-1.7 ms with this and the lighter :func:`_warm_up`, the execution's p50 from
    2.1-2.4 to 1.7-1.8 ms.
    """
    for _ in range(REHEARSALS):
        sender, receiver = socket.socketpair()
        socket.send_fds(sender, [_SAMPLE_REQUEST], [sender.fileno()])
        sender.shutdown(socket.SHUT_WR)  # the end of the request, though a copy is in flight
        sender.close()
        request, passed = _read_request(receiver.detach())
        for fd in passed:
            os.close(fd)
        if request is None:
            raise RuntimeError("the rehearsal's request did not arrive")
        _walk_request_path(request, config)
        os.environ["SANDBOX_REHEARSAL"] = "1"
        del os.environ["SANDBOX_REHEARSAL"]
        _exit_code(SystemExit(0))


def _std_streams() -> tuple[Any, Any, Any]:
    """Text streams on fds 0-2 like those of a fresh interpreter (see :func:`prepare_zygote`)."""

    def text(fd: int, mode: str, like: Any, line_buffering: bool) -> io.TextIOWrapper:
        raw = io.FileIO(fd, mode, closefd=False)
        buffered: Any = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
        encoding = getattr(like, "encoding", None) or "utf-8"
        errors = getattr(like, "errors", None) or "strict"
        return io.TextIOWrapper(
            buffered, encoding=encoding, errors=errors, line_buffering=line_buffering
        )

    return (
        text(0, "r", sys.__stdin__, False),
        text(1, "w", sys.__stdout__, False),
        text(2, "w", sys.__stderr__, True),
    )


def _run_python_main(
    script: str,
    args: list[str],
    env: dict[str, str],
    *,
    fresh_modules: bool,
) -> NoReturn:
    """Run ``script`` as ``__main__`` in this interpreter, then exit like ``python3`` would."""
    for key, value in env.items():  # into the environment prepare_zygote emptied
        os.environ[key] = value  # (update()'s Mapping check costs a fork 40 page faults)
    if env.get("PYTHONUNBUFFERED"):
        sys.stdout.reconfigure(write_through=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(write_through=True)  # type: ignore[union-attr]
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    if fresh_modules:
        _drop_modules()
    path = os.path.abspath(script)
    sys.argv = [script, *args]
    extra = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[0:1] = [os.path.dirname(path), *extra]
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    main.__cached__ = None  # type: ignore[attr-defined]
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    sys.modules["__main__"] = main
    code = 0
    try:
        with open(path, "rb") as handle:
            source = handle.read()
        exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt as exc:
        _excepthook(exc)
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException as exc:
        _excepthook(exc)
        code = 1
    try:
        # Wait for non-daemon threads, as interpreter shutdown does: when the script (or
        # the harness) imported threading, the one in sys.modules.
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
    except SystemExit as exc:
        code = _exit_code(exc)
    atexit._run_exitfuncs()
    if not _flush():
        code = 120
    os._exit(code)


def _drop_modules() -> None:
    """Take every module a fresh ``python3`` would not have out of ``sys.modules``.

    The zygote listed them (:func:`prepare_zygote`); a scan of ``sys.modules`` here
    would touch every name in it (40 page faults more). Should anything have been
    imported since (the count differs: nothing ever removes a module), the scan runs.
    Still referenced from here, the modules are not torn down (that would cost time and
    copy-on-write pages); they are only out of the import system's view.
    """
    pop = sys.modules.pop
    _DROPPED_MODULES.extend([pop(name) for name in _ZYGOTE_EXTRA_MODULES if name in sys.modules])
    if len(sys.modules) != _FRESH_COUNT:
        _DROPPED_MODULES.extend([pop(n) for n in list(sys.modules) if n not in BASELINE_MODULES])


def _excepthook(exc: BaseException) -> None:
    # Hide this module's frame: tracebacks start at the user's script.
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    if isinstance(exc, SyntaxError) and exc.filename is not None:
        tb = None
    with contextlib.suppress(BaseException):
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)


def _exit_code(exc: SystemExit) -> int:
    value = exc.code
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    with contextlib.suppress(BaseException):
        print(value, file=sys.stderr)
    return 1


def _flush() -> bool:
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:
            ok = False
    return ok
