"""The zygote: forked at start-up, before any request, it forks every process that runs code.

The runner reads requests (hidden tests among them) and collects outputs, so
its memory holds data of earlier executions. A process forked from it would
inherit that memory, and untrusted code may read its own memory. So the runner
never forks untrusted code itself: it asks the zygote, whose memory holds
nothing but the interpreter, for a *spare*. The zygote forks it, hands the
runner the spare's file descriptors (SCM_RIGHTS), and reports every child's
exit (wait status and resource usage), since only a parent can wait for it.

On request it also forks a *killer*: a process that drops to one untrusted uid
and SIGKILLs every process of that uid at once (``kill(-1)``), which no fork
bomb can outrun, as it can outrun a scan of /proc. It comes from the zygote, not
the runner, so that no copy of the runner's memory ever runs as an untrusted uid
while processes of that uid live. (The reset's System V IPC clean-up forks from
the runner and drops to the owner's uid, but only once every process of that uid
is dead, and it runs nothing but the removal; see ``reset._remove_ipc_as``.)

Commands from the runner are ``spawn`` and ``kill UID GID``; messages back are
small dicts, one per datagram on the SOCK_SEQPACKET pair. They, and each spare's
request, are :mod:`marshal` data, not JSON: they only ever pass between the runner,
the zygote and the spares (trusted code, root, on socket pairs no other process
holds), and a freshly forked spare decodes marshal with a fraction of the page
faults json's decoder costs it (about 0.15 ms of CPU an execution here).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import signal
import socket
import time
from typing import TYPE_CHECKING

from . import child

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, NoReturn

    from .config import Config

_MAX_MESSAGE = 4096
_SPARE_FDS = 5
FORK_ATTEMPTS = 8
KILL_ROUNDS = 4  # processes forked while one kill(-1) was under way get the next one
KILLER_WAIT_S = 2.0
_NO_KILLER = -1


class Spare:
    """A child of the zygote waiting for its request, with its stdio already in place."""

    def __init__(self, pid: int, fds: list[int]) -> None:
        self.pid = pid
        self.stdin_fd, self.out_r, self.err_r, control_fd, self.status_r = fds
        self.control = socket.socket(fileno=control_fd)

    def start(self, request: dict[str, Any], stdin: bytes, pass_fds: list[int]) -> None:
        """Hand the spare its request: stdin into its memfd, the rest (and fds) on its socket.

        The memfd is emptied first: while the spare waited, an earlier execution's code
        may have written to it (under gVisor any uid can reopen it through /proc).
        """
        os.ftruncate(self.stdin_fd, 0)
        if stdin:
            os.write(self.stdin_fd, stdin)
            os.lseek(self.stdin_fd, 0, os.SEEK_SET)
        os.close(self.stdin_fd)
        body = marshal.dumps(request)
        try:
            socket.send_fds(self.control, [body[:65536]], pass_fds)
            self.control.sendall(body[65536:])
            self.control.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the spare died; the zygote reports its exit
        self.control.close()

    def close_status(self) -> None:
        """Close the set-up status pipe (of a spare whose status is not read).

        Each descriptor is closed exactly once, by its one owner (stdout and
        stderr by the executor's captures): closing one again could close
        whatever reused its number meanwhile, such as a pipe of a spare the
        zygote sent during the run.
        """
        with contextlib.suppress(OSError):
            os.close(self.status_r)


class Zygote:
    """The runner's handle on the zygote process."""

    def __init__(self, config: Config) -> None:
        runner_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            runner_end.close()
            _serve(zygote_end, config)
        zygote_end.close()
        self.pid = pid
        self.sock = runner_end
        self.exits: dict[int, dict[str, Any]] = {}
        self._spares: list[Spare] = []
        self._requested = 0
        self._killer: int | None = None

    def fileno(self) -> int:
        return self.sock.fileno()

    def request_spares(self, count: int) -> None:
        """Ask ahead of need for spares until ``count`` are ready or on their way."""
        while len(self._spares) + self._requested < count:
            self.sock.send(b"spawn")
            self._requested += 1

    def spare(self) -> Spare:
        """A ready spare (waiting for the zygote if one is on its way)."""
        if not self._spares:
            if not self._requested:
                self.sock.send(b"spawn")
                self._requested += 1
            while not self._spares:
                self.receive(block=True)
        return self._spares.pop()

    def spare_pids(self) -> list[int]:
        """The pids of the spares, once those on their way have arrived (a root session's
        scan for leftovers must know every process of the runner's)."""
        while self._requested:
            self.receive(block=True)
        return [spare.pid for spare in self._spares]

    def kill_all_of(self, ids: Iterable[tuple[int, int]]) -> None:
        """:meth:`kill_every_process_of` each ``(uid, gid)``."""
        for uid, gid in ids:
            self.kill_every_process_of(uid, gid)

    def kill_every_process_of(self, uid: int, gid: int) -> None:
        """SIGKILL every process of ``uid`` at once; returns when that is done.

        Does nothing more when the zygote cannot fork (a full pids limit): the
        caller's scan of /proc does the work then.
        """
        self._killer = None
        self.sock.send(b"kill %d %d" % (uid, gid))
        while self._killer is None:
            self.receive(block=True)
        if self._killer != _NO_KILLER:
            self.wait_exit(self._killer, KILLER_WAIT_S)

    def receive(self, *, block: bool = False) -> None:
        """Read the zygote's messages: spares handed over, children exited."""
        while True:
            if not block and not select.select([self.sock], [], [], 0)[0]:
                return
            data, fds, _, _ = socket.recv_fds(self.sock, _MAX_MESSAGE, _SPARE_FDS)
            if not data:
                raise RuntimeError("the zygote exited")
            message = marshal.loads(data)
            if "spare" in message:
                self._requested -= 1
                self._spares.append(Spare(message["spare"], fds))
            elif "error" in message:
                self._requested -= 1
                raise RuntimeError(message["error"])
            elif "killer" in message:
                self._killer = message["killer"]
            else:
                self.exits[message["exit"]] = message
            block = False

    def wait_exit(self, pid: int, timeout: float | None) -> dict[str, Any] | None:
        """The exit report of ``pid``, waiting up to ``timeout`` seconds (None: forever)."""
        while pid not in self.exits:
            if not select.select([self.sock], [], [], timeout)[0]:
                return None
            self.receive()
        return self.exits.pop(pid)


def _serve(sock: socket.socket, config: Config) -> NoReturn:
    """The zygote's loop: fork spares on request, report exits. Ends with the runner."""
    child.prepare_zygote(config)  # while fds 0-2 are of the kinds a spare's will be
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # the runner's channel stays the runner's
    keep = sock.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, 65536)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    while True:
        ready, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            try:
                _report_exits(sock)
            except BrokenPipeError:
                os._exit(0)
        if sock.fileno() in ready:
            try:
                command = sock.recv(64)
            except InterruptedError:
                continue
            except OSError:
                command = b""
            if not command:
                os._exit(0)  # the runner is gone
            try:
                if command.startswith(b"kill "):
                    _fork_killer(sock, *(int(n) for n in command.split()[1:3]))
                    continue
                _fork_spare(sock, config)
            except BrokenPipeError:
                os._exit(0)  # the runner is gone
            except OSError as exc:  # e.g. the pids limit is still full of a fork bomb
                sock.send(marshal.dumps({"error": f"cannot fork a spare: {exc}"}))


def _fork_spare(sock: socket.socket, config: Config) -> None:
    stdin_fd = os.memfd_create("stdin", os.MFD_CLOEXEC)
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    runner_control, spare_control = socket.socketpair()
    status_r, status_w = os.pipe2(os.O_CLOEXEC)
    try:
        pid = _fork_with_retries()
    except OSError:
        for fd in (stdin_fd, out_r, out_w, err_r, err_w, status_r, status_w):
            os.close(fd)
        runner_control.close()
        spare_control.close()
        raise
    if pid == 0:
        sock.close()
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        child.serve_as_spare(spare_control.detach(), status_w, config)
    spare_control.close()
    for fd in (out_w, err_w, status_w):
        os.close(fd)
    handed = [stdin_fd, out_r, err_r, runner_control.fileno(), status_r]
    socket.send_fds(sock, [marshal.dumps({"spare": pid})], handed)
    runner_control.close()
    for fd in (stdin_fd, out_r, err_r, status_r):
        os.close(fd)


def _fork_killer(sock: socket.socket, uid: int, gid: int) -> None:
    """Fork a process that SIGKILLs every process of ``uid``; tell the runner its pid."""
    try:
        pid = os.fork()  # no retries: with the pids limit full, the runner's scan works alone
    except OSError:
        pid = _NO_KILLER
    if pid == 0:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            os.closerange(3, 65536)
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            for _ in range(KILL_ROUNDS):
                os.kill(-1, signal.SIGKILL)  # every process this uid may signal, but itself
                time.sleep(0.001)
            code = 0
        except ProcessLookupError:
            code = 0  # none (left)
        finally:
            os._exit(code)
    sock.send(marshal.dumps({"killer": pid}))


def _fork_with_retries() -> int:
    """``os.fork``, retried for a while when the pids limit is momentarily full."""
    delay = 0.01
    for _ in range(FORK_ATTEMPTS - 1):
        try:
            return os.fork()
        except BlockingIOError:
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
    return os.fork()


def _report_exits(sock: socket.socket) -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        report = {
            "exit": pid,
            "status": status,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "maxrss_kb": usage.ru_maxrss,
        }
        sock.send(marshal.dumps(report))
