"""Run one untrusted program (or a judge with its candidate) and watch it.

A spare from the zygote (see :mod:`zygote`) becomes the program; the runner
waits on its output pipes and on the zygote's exit reports, killing the whole
process group (SIGTERM, a grace period, then SIGKILL) and every straggler of
the untrusted uids when a wall-time, CPU-time, memory or output limit is hit.
The verdict about *why* a program stopped is decided here, by trusted code,
from what the kernel reports.

With a ``peer`` the request runs two programs joined by a socket on fd 3:
the main one as the *judge* uid (hidden tests) and the peer as the *sandbox*
uid (candidate code), so candidate code can neither read the tests nor touch
the process that decides the verdict; the peer cannot open the ``/proc``
entries of any process but its own either (:mod:`landlock`, where the kernel
has it), so the judge's command lines stay its own.

With ``channel`` the program (the platform's pytest harness for agent tasks,
``harness/pytest_channel.py``) gets a report channel: fd 3 holds a random
nonce made here for this run, fd 4 is a pipe read here. The one report that
comes back carrying the nonce is the result's ``channel``; anything else on
the pipe, or nothing, is an ``error`` there. Files the judged process writes
prove nothing; this pipe and the nonce are the runner's own.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import stat
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

from . import procs
from .cgroup import Cgroup
from .config import JUDGE, ROOT, SANDBOX
from .protocol import b64decode, b64encode

if TYPE_CHECKING:
    from .config import Config
    from .zygote import Zygote

READ_CHUNK = 65536
TERM_GRACE_S = 0.2
KILL_WAIT_S = 5.0
POLL_INTERVAL_S = 0.05
DRAIN_LIMIT_S = 0.2
MAX_CHANNEL_BYTES = 8 << 20

OK = "ok"
NONZERO_EXIT = "nonzero_exit"
TIMEOUT = "timeout"
MEMORY_LIMIT = "memory_limit"
OUTPUT_LIMIT = "output_limit"
SIGNAL = "signal"
SETUP_ERROR = "setup_error"


class _Capture:
    """Bytes read from one pipe, up to a cap."""

    def __init__(self, fd: int, cap: int, *, keep_going: bool = False) -> None:
        self.fd = fd
        self.cap = cap
        self.keep_going = keep_going
        self.chunks: list[bytes] = []
        self.size = 0
        self.truncated = False
        self.open = True

    def read(self) -> bool:
        """Read what is available; False once the cap is exceeded (unless ``keep_going``).

        A ``keep_going`` capture keeps draining past the cap and drops the excess,
        so a chatty peer never blocks on a full pipe.
        """
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
            return self.keep_going
        self.chunks.append(data)
        self.size += len(data)
        return True

    def close(self) -> None:
        if self.open:
            os.close(self.fd)
            self.open = False

    def data(self) -> bytes:
        return b"".join(self.chunks)


class _ReportChannel:
    """A nonce in (fd 3 of the program), one report out (fd 4), read and checked here."""

    def __init__(self) -> None:
        self.nonce = os.urandom(32).hex()  # what secrets.token_hex(32) returns
        nonce_r, nonce_w = os.pipe2(os.O_CLOEXEC)
        os.write(nonce_w, self.nonce.encode())  # far below a pipe's buffer
        os.close(nonce_w)
        report_r, report_w = os.pipe2(os.O_CLOEXEC)
        self.program_fds = [nonce_r, report_w]
        self.capture = _Capture(report_r, MAX_CHANNEL_BYTES, keep_going=True)

    def handed(self) -> None:
        """The program has its ends: drop ours, so the pipe ends when the program's close."""
        for fd in self.program_fds:
            os.close(fd)
        self.program_fds = []

    def outcome(self) -> dict[str, Any]:
        """``{"report": ...}`` (the report without its nonce) or ``{"error": why not}``."""
        if self.capture.truncated:
            return {"error": f"the report channel carried more than {MAX_CHANNEL_BYTES} bytes"}
        data = self.capture.data()
        if not data:
            return {"error": "no report came on the channel (the test process ended early)"}
        try:
            report = json.loads(data)
        except ValueError:
            return {"error": "the report channel carried something other than one JSON report"}
        # Imported here: the zygote, forked from the runner at start, must not carry
        # hashlib and OpenSSL into every program (see Runner.__init__).
        import hmac

        given = report.pop("nonce", None) if isinstance(report, dict) else None
        if not isinstance(given, str) or not hmac.compare_digest(
            given.encode(errors="replace"), self.nonce.encode()
        ):
            return {"error": "the report on the channel does not carry this run's nonce"}
        return {"report": report}


class Executor:
    """Runs requests with spares from the zygote and reports what happened to them."""

    def __init__(self, config: Config, zygote: Zygote, channel_fd: int) -> None:
        self.config = config
        self.zygote = zygote
        self.channel_fd = channel_fd
        self.cgroup = Cgroup(gvisor=config.runtime == "runsc")
        # Whether the last execution ended with a scan that found no process of the
        # untrusted uids: until the next request nothing runs as them (see reset).
        self.none_left = False

    def kill_at_once(self) -> None:
        """SIGKILL every process of the untrusted uids in one go (see :func:`procs.kill_all`)."""
        self.zygote.kill_all_of(self.config.ids.values())

    def kill_leftovers(self) -> list[int]:
        """Kill every process of the untrusted uids and, with ``--root``, every process but
        the runner's own (itself, the zygote, the spares); returns the pids that survived."""
        if self.config.root:  # one scan of every process; the untrusted uids killed at once
            return procs.kill_all(
                None, kill_at_once=self.kill_at_once, spared=self.zygote.spare_pids()
            )
        return procs.kill_all(self.config.untrusted_uids, kill_at_once=self.kill_at_once)

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Execute one ``exec`` request and return its result message."""
        self.none_left = False
        limits = request.get("limits") or {}
        wall_s = float(limits.get("wall_s", 10))
        cpu_s = float(limits.get("cpu_s", 10))
        memory_cap = limits.get("memory_bytes")
        peer_request: dict[str, Any] = request.get("peer") or {}
        main = self.zygote.spare()
        peer = self.zygote.spare() if peer_request else None
        channel = _ReportChannel() if request.get("channel") and peer is None else None
        oom_before = self.cgroup.oom_kills()
        cpu_before = self.cgroup.cpu_seconds()
        memory_before = self.cgroup.memory_bytes() or 0
        started = time.monotonic()
        if peer is not None:
            judge_end, candidate_end = socket.socketpair()
            peer.start(
                {**peer_request, "role": SANDBOX, "limits": limits, "hide_processes": True},
                b64decode(peer_request.get("stdin") or ""),
                [candidate_end.fileno()],
            )
            main.start(
                _child_request(request, ROOT if request.get("role") == ROOT else JUDGE),
                _stdin(request),
                [judge_end.fileno()],
            )
            judge_end.close()
            candidate_end.close()
        else:
            main.start(
                _child_request(request, request.get("role") or SANDBOX),
                _stdin(request),
                channel.program_fds if channel is not None else [],
            )
            if channel is not None:
                channel.handed()
        stdout = _Capture(main.out_r, int(limits.get("stdout_bytes", 1 << 20)))
        stderr = _Capture(main.err_r, int(limits.get("stderr_bytes", 1 << 20)))
        watched = [stdout, stderr]
        if peer is not None:
            peer_cap = int(limits.get("stderr_bytes", 1 << 20))
            peer_out = _Capture(peer.out_r, peer_cap, keep_going=True)
            peer_err = _Capture(peer.err_r, peer_cap, keep_going=True)
            watched += [peer_out, peer_err]
        if channel is not None:
            watched.append(channel.capture)
        reason, exit_report = self._watch(
            main.pid,
            watched,
            started + wall_s,
            cpu_s,
            cpu_before,
            self._memory_cap(memory_before, memory_cap),
        )
        wall = time.monotonic() - started
        setup_failure = _read_status(main.status_r)
        peer_report = None
        if peer is not None:
            peer_report = self._stop(peer.pid)
        if not request.get("keep_processes"):
            survivors = self.kill_leftovers()
            if survivors:
                reason = reason or "leftover processes survived SIGKILL"
            self.none_left = not survivors
        self._drain(*watched)  # closes every capture's pipe
        if peer is not None:
            peer.close_status()  # the main spare's was closed by _read_status
        status = exit_report["status"]
        cpu = exit_report["cpu_s"]
        oom = (self.cgroup.oom_kills() or 0) > (oom_before or 0)
        if reason is None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
            reason = "cpu_time"
        result: dict[str, Any] = {
            "status": _verdict(status, reason, oom, cpu, cpu_s),
            "exit_code": os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "stdout": b64encode(stdout.data()),
            "stderr": b64encode(stderr.data()),
            "stdout_truncated": stdout.truncated,
            "stderr_truncated": stderr.truncated,
            "wall_s": round(wall, 6),
            "cpu_s": round(cpu, 6),
            "peak_memory_bytes": exit_report["maxrss_kb"] * 1024,
            "reason": reason,
            "oom_killed": oom,
            "files": _fetch(request.get("fetch") or [], request.get("cwd") or "/workspace"),
        }
        if peer is not None and peer_report is not None:
            peer_status = peer_report["status"]
            result["peer"] = {
                "exit_code": (
                    os.waitstatus_to_exitcode(peer_status) if os.WIFEXITED(peer_status) else None
                ),
                "signal": os.WTERMSIG(peer_status) if os.WIFSIGNALED(peer_status) else None,
                "stdout": b64encode(peer_out.data()),
                "stderr": b64encode(peer_err.data()),
                "cpu_s": round(peer_report["cpu_s"], 6),
            }
        if channel is not None:
            result["channel"] = channel.outcome()
        if setup_failure is not None:
            result["status"] = SETUP_ERROR
            result["setup_error"] = setup_failure
        return result

    def _watch(
        self,
        pid: int,
        captures: list[_Capture],
        deadline: float,
        cpu_s: float,
        cpu_before: float | None,
        memory_cap: int | None,
    ) -> tuple[str | None, dict[str, Any]]:
        """Wait for ``pid`` while enforcing limits; returns (kill reason, exit report)."""
        poller = select.poll()
        by_fd = {capture.fd: capture for capture in captures}
        for fd in by_fd:
            os.set_blocking(fd, False)
            poller.register(fd, select.POLLIN)
        poller.register(self.zygote.fileno(), select.POLLIN)
        # Only hang-up: the service is gone (its attach closed our stdin), so stop now
        # rather than let the program run on for nobody.
        poller.register(self.channel_fd, 0)
        while True:
            if pid in self.zygote.exits:
                return None, self.zygote.exits.pop(pid)
            now = time.monotonic()
            reason = self._limit_hit(now, deadline, cpu_s, cpu_before, memory_cap)
            if reason == "memory":
                # No grace: a program allowed to go on allocating may reach the host's
                # limit (under gVisor it then takes the whole sandbox with it).
                _signal_group(pid, signal.SIGKILL)
                return reason, self._stop(pid)
            if reason is not None:
                return reason, self._stop(pid)
            timeout = max(0.0, min(deadline - now, POLL_INTERVAL_S))
            for fd, _ in poller.poll(timeout * 1000):
                if fd == self.zygote.fileno():
                    self.zygote.receive()
                    continue
                if fd == self.channel_fd:
                    return "channel_closed", self._stop(pid)
                capture = by_fd[fd]
                if not capture.read():
                    return "output", self._stop(pid)
                if not capture.open:
                    poller.unregister(fd)
                    del by_fd[fd]

    def _memory_cap(self, memory_before: int, lowered: int | None) -> int | None:
        """The memory count past which the program is killed: the request's lowered limit
        on top of what was in use before it, and under gVisor the policy's own limit."""
        caps = [] if lowered is None else [memory_before + int(lowered)]
        if self.config.memory_bytes is not None:
            caps.append(self.config.memory_bytes)
        return min(caps, default=None)

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

    def _stop(self, pid: int) -> dict[str, Any]:
        """SIGTERM the process group, wait a grace period, then SIGKILL it and every straggler.

        Returns the exit report of ``pid`` (which may already have exited).
        """
        report = self.zygote.exits.pop(pid, None)
        if report is not None:
            return report
        _signal_group(pid, signal.SIGTERM)
        report = self.zygote.wait_exit(pid, TERM_GRACE_S)
        if report is None:
            _signal_group(pid, signal.SIGKILL)
            report = self.zygote.wait_exit(pid, KILL_WAIT_S)
        if report is None:
            raise RuntimeError(f"process {pid} survived SIGKILL for {KILL_WAIT_S} s")
        return report

    def _drain(self, *captures: _Capture) -> None:
        """Read what is left in the pipes; stop at once when a writer still lives and is idle."""
        end = time.monotonic() + DRAIN_LIMIT_S
        for capture in captures:
            while capture.open and time.monotonic() < end:
                if not _readable(capture.fd) or not capture.read():
                    break
            capture.close()


def _child_request(request: dict[str, Any], role: str) -> dict[str, Any]:
    """What the spare needs: the request minus stdin (it goes into the memfd) and the peer."""
    return {
        key: value for key, value in request.items() if key not in ("stdin", "peer", "fetch")
    } | {"role": role}


def _stdin(request: dict[str, Any]) -> bytes:
    return b64decode(request.get("stdin") or "")


def _fetch(paths: list[str], cwd: str) -> dict[str, Any]:
    """Read requested files back; symlinks anywhere on the path and non-files are refused.

    The runner reads them itself (root with DAC_OVERRIDE), walking directory
    descriptors with O_NOFOLLOW. In a session the background processes still run
    meanwhile: the walk, not a stop, is what makes a swapped-in link harmless.
    """
    return {path: _read_regular_file(cwd, path) for path in paths}


MAX_FETCH_BYTES = 16 << 20


def _read_regular_file(cwd: str, path: str) -> dict[str, Any]:
    """Open ``path`` under ``cwd`` without following any symlink on the way."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or path.startswith("/"):
        return {"error": "invalid path"}
    # O_PATH: gVisor follows a symlink opened O_RDONLY | O_DIRECTORY | O_NOFOLLOW (Linux
    # refuses it); with O_PATH both refuse it, and a path descriptor serves as dir_fd.
    flags_dir = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW
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


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])
