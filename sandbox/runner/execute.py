"""Run one untrusted program and watch it: time, CPU, memory and output limits.

The runner forks a child (see :mod:`child`), then waits on the child's output
pipes and on SIGCHLD, killing the whole process group (SIGTERM, a grace
period, then SIGKILL) and every straggler of the untrusted uid when a limit is
hit. The verdict about *why* a program stopped is decided here, by trusted
code, from what the kernel reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import stat
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

from . import child, procs
from .cgroup import Cgroup
from .protocol import b64decode, b64encode

READ_CHUNK = 65536
TERM_GRACE_S = 0.2
POLL_INTERVAL_S = 0.05
DRAIN_LIMIT_S = 0.2

OK = "ok"
NONZERO_EXIT = "nonzero_exit"
TIMEOUT = "timeout"
MEMORY_LIMIT = "memory_limit"
OUTPUT_LIMIT = "output_limit"
SIGNAL = "signal"
SETUP_ERROR = "setup_error"


class _Capture:
    """Bytes read from one pipe, up to a cap."""

    def __init__(self, fd: int, cap: int) -> None:
        self.fd = fd
        self.cap = cap
        self.chunks: list[bytes] = []
        self.size = 0
        self.truncated = False
        self.open = True

    def read(self) -> bool:
        """Read what is available; False once the cap is exceeded."""
        try:
            data = os.read(self.fd, READ_CHUNK)
        except BlockingIOError:
            return True
        if not data:
            self.close()
            return True
        room = self.cap - self.size
        if len(data) > room:
            self.chunks.append(data[:room])
            self.size = self.cap
            self.truncated = True
            return False
        self.chunks.append(data)
        self.size += len(data)
        return True

    def close(self) -> None:
        if self.open:
            os.close(self.fd)
            self.open = False

    def data(self) -> bytes:
        return b"".join(self.chunks)


class Spare:
    """A pre-forked child waiting for its request, with its stdio pipes already in place."""

    def __init__(self, uid: int, gid: int) -> None:
        self.stdin_fd = os.memfd_create("stdin", os.MFD_CLOEXEC)
        self.out_r, out_w = os.pipe2(os.O_CLOEXEC)
        self.err_r, err_w = os.pipe2(os.O_CLOEXEC)
        control_r, self.control_w = os.pipe2(os.O_CLOEXEC)
        self.status_r, status_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            os.dup2(self.stdin_fd, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            child.serve_as_spare(control_r, status_w, uid, gid)
        self.pid = pid
        for fd in (out_w, err_w, control_r, status_w):
            os.close(fd)

    def start(self, request: dict[str, Any]) -> None:
        """Hand the spare its request: stdin goes into its memfd, the rest down its pipe."""
        stdin = b64decode(request.pop("stdin", "") or "")
        if stdin:
            os.write(self.stdin_fd, stdin)
            os.lseek(self.stdin_fd, 0, os.SEEK_SET)
        os.close(self.stdin_fd)
        body = json.dumps(request).encode()
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(self.control_w, view) :]
        except BrokenPipeError:
            pass  # the spare died; its wait status tells what happened
        os.close(self.control_w)

    def discard(self) -> None:
        """Tell the spare to exit and reap it."""
        os.close(self.control_w)
        os.close(self.stdin_fd)
        for fd in (self.out_r, self.err_r, self.status_r):
            os.close(fd)
        os.waitpid(self.pid, 0)


class Executor:
    """Runs programs as ``uid:gid`` and reports what happened to them."""

    def __init__(self, uid: int, gid: int, wakeup_fd: int) -> None:
        self.uid = uid
        self.gid = gid
        self.wakeup_fd = wakeup_fd
        self.cgroup = Cgroup()
        self.spare: Spare | None = None

    def prepare_spare(self) -> None:
        """Fork the process that will run the next request, if there is none yet."""
        if self.spare is None:
            self.spare = Spare(self.uid, self.gid)

    def discard_spare(self) -> None:
        if self.spare is not None:
            self.spare.discard()
            self.spare = None

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Execute one ``exec`` request and return its result message."""
        limits = request.get("limits") or {}
        wall_s = float(limits.get("wall_s", 10))
        cpu_s = float(limits.get("cpu_s", 10))
        memory_cap = limits.get("memory_bytes")
        self.prepare_spare()
        spare, self.spare = self.spare, None
        assert spare is not None
        oom_before = self.cgroup.oom_kills()
        cpu_before = self.cgroup.cpu_seconds()
        memory_before = self.cgroup.memory_bytes() or 0
        started = time.monotonic()
        spare.start(request)
        pid, out_r, err_r, status_r = spare.pid, spare.out_r, spare.err_r, spare.status_r
        stdout = _Capture(out_r, int(limits.get("stdout_bytes", 1 << 20)))
        stderr = _Capture(err_r, int(limits.get("stderr_bytes", 1 << 20)))
        reason, status, rusage = self._watch(
            pid,
            stdout,
            stderr,
            started + wall_s,
            cpu_s,
            cpu_before,
            None if memory_cap is None else memory_before + int(memory_cap),
        )
        wall = time.monotonic() - started
        setup_failure = _read_status(status_r)
        if not request.get("keep_processes"):
            survivors = procs.kill_all(self.uid)
            if survivors:
                reason = reason or "leftover processes survived SIGKILL"
        self._drain(stdout, stderr)
        files = self._fetch(request.get("fetch") or [], request.get("cwd") or "/workspace")
        cpu = rusage.ru_utime + rusage.ru_stime
        oom = (self.cgroup.oom_kills() or 0) > (oom_before or 0)
        verdict = _verdict(status, reason, oom, cpu, cpu_s)
        result: dict[str, Any] = {
            "status": verdict,
            "exit_code": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "stdout": b64encode(stdout.data()),
            "stderr": b64encode(stderr.data()),
            "stdout_truncated": stdout.truncated,
            "stderr_truncated": stderr.truncated,
            "wall_s": round(wall, 6),
            "cpu_s": round(cpu, 6),
            "peak_memory_bytes": rusage.ru_maxrss * 1024,
            "reason": reason,
            "files": files,
        }
        if setup_failure is not None:
            result["status"] = SETUP_ERROR
            result["setup_error"] = setup_failure
        return result

    def _watch(
        self,
        pid: int,
        stdout: _Capture,
        stderr: _Capture,
        deadline: float,
        cpu_s: float,
        cpu_before: float | None,
        memory_cap: int | None,
    ) -> tuple[str | None, int, Any]:
        """Wait for ``pid`` while enforcing limits; returns (kill reason, wait status, rusage)."""
        poller = select.poll()
        captures = {stdout.fd: stdout, stderr.fd: stderr}
        for fd in captures:
            os.set_blocking(fd, False)
            poller.register(fd, select.POLLIN)
        poller.register(self.wakeup_fd, select.POLLIN)
        reason: str | None = None
        while True:
            waited, status, rusage = os.wait4(pid, os.WNOHANG)
            if waited == pid:
                return reason, status, rusage
            now = time.monotonic()
            if reason is None:
                reason = self._limit_hit(now, deadline, cpu_s, cpu_before, memory_cap)
            if reason is not None:
                return reason, *self._kill(pid)
            timeout = max(0.0, min(deadline - now, POLL_INTERVAL_S))
            for fd, _ in poller.poll(timeout * 1000):
                if fd == self.wakeup_fd:
                    _drain_fd(fd)
                    continue
                capture = captures[fd]
                if not capture.read():
                    return "output", *self._kill(pid)
                if not capture.open:
                    poller.unregister(fd)
                    del captures[fd]

    def _limit_hit(
        self,
        now: float,
        deadline: float,
        cpu_s: float,
        cpu_before: float | None,
        memory_cap: int | None,
    ) -> str | None:
        if now >= deadline:
            return "wall_time"
        cpu_now = self.cgroup.cpu_seconds()
        if cpu_now is not None and cpu_before is not None and cpu_now - cpu_before > cpu_s:
            return "cpu_time"
        if memory_cap is not None:
            used = self.cgroup.memory_bytes()
            if used is not None and used > memory_cap:
                return "memory"
        return None

    def _kill(self, pid: int) -> tuple[int, Any]:
        """SIGTERM the process group, wait a grace period, then SIGKILL it and every straggler."""
        _signal_group(pid, signal.SIGTERM)
        end = time.monotonic() + TERM_GRACE_S
        while time.monotonic() < end:
            waited, status, rusage = os.wait4(pid, os.WNOHANG)
            if waited == pid:
                procs.kill_all(self.uid)
                return status, rusage
            time.sleep(0.005)
        _signal_group(pid, signal.SIGKILL)
        procs.kill_all(self.uid, deadline_s=0.2)
        _, status, rusage = os.wait4(pid, 0)
        return status, rusage

    def _drain(self, *captures: _Capture) -> None:
        """Read what is left in the pipes; stop at once when a writer still lives and is idle."""
        end = time.monotonic() + DRAIN_LIMIT_S
        for capture in captures:
            while capture.open and time.monotonic() < end:
                if not _readable(capture.fd) or not capture.read():
                    break
            capture.close()

    def _fetch(self, paths: list[str], cwd: str) -> dict[str, Any]:
        """Read requested files back as the untrusted uid; symlinks and non-files are refused."""
        if not paths:
            return {}
        read_r, read_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_r)
            try:
                os.setgroups([])
                os.setresgid(self.gid, self.gid, self.gid)
                os.setresuid(self.uid, self.uid, self.uid)
                out = json.dumps({p: _read_regular_file(cwd, p) for p in paths}).encode()
                view = memoryview(out)
                while view:
                    view = view[os.write(read_w, view) :]
            finally:
                os._exit(0)
        os.close(read_w)
        chunks = []
        while chunk := os.read(read_r, READ_CHUNK):
            chunks.append(chunk)
        os.close(read_r)
        os.waitpid(pid, 0)
        try:
            fetched: dict[str, Any] = json.loads(b"".join(chunks) or b"{}")
        except ValueError:
            fetched = {p: {"error": "could not read"} for p in paths}
        return fetched


MAX_FETCH_BYTES = 16 << 20


def _read_regular_file(cwd: str, path: str) -> dict[str, Any]:
    """Open ``path`` under ``cwd`` without following any symlink on the way."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or path.startswith("/"):
        return {"error": "invalid path"}
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        fd = os.open(cwd, flags_dir)
    except OSError as exc:
        return {"error": exc.strerror or "cannot open"}
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, flags_dir, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        file_fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except FileNotFoundError:
        os.close(fd)
        return {"error": "not found"}
    except OSError as exc:
        os.close(fd)
        if exc.errno in (40, 20):  # ELOOP, ENOTDIR: a symlink where a file or dir was expected
            return {"error": "symlink refused"}
        return {"error": exc.strerror or "cannot open"}
    os.close(fd)
    try:
        info = os.fstat(file_fd)
        if not stat.S_ISREG(info.st_mode):
            return {"error": "not a regular file"}
        if info.st_size > MAX_FETCH_BYTES:
            return {"error": f"larger than {MAX_FETCH_BYTES} bytes"}
        chunks = []
        while chunk := os.read(file_fd, READ_CHUNK):
            chunks.append(chunk)
        return {"data": b64encode(b"".join(chunks))}
    finally:
        os.close(file_fd)


def _verdict(status: int, reason: str | None, oom: bool, cpu: float, cpu_s: float) -> str:
    if reason == "output":
        return OUTPUT_LIMIT
    if reason == "memory" or oom:
        return MEMORY_LIMIT
    if reason in ("wall_time", "cpu_time"):
        return TIMEOUT
    if os.WIFSIGNALED(status):
        if os.WTERMSIG(status) == signal.SIGXCPU or cpu >= cpu_s:
            return TIMEOUT
        return SIGNAL
    return OK if os.WEXITSTATUS(status) == 0 else NONZERO_EXIT


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _read_status(fd: int) -> dict[str, Any] | None:
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    os.close(fd)
    if not data:
        return None
    try:
        parsed: dict[str, Any] = json.loads(data)
    except ValueError:
        return {"kind": "setup", "error": data.decode(errors="replace")}
    return parsed


def _drain_fd(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])
