"""The runner: a persistent process inside every sandbox container.

Started by the backend as ``python3 -m runner --uid U --gid G --judge-uid J
--judge-gid K --dir /workspace:755 ...``, as root with only the capabilities
needed to drop privileges, to kill the untrusted uids and to wipe what they
wrote. Its first act is to fork the zygote (see :mod:`runner.zygote`), which
forks every process that will run code. It reads length-prefixed JSON requests
on stdin and answers on stdout (the container's attached stdio), one request at
a time. With ``--socket PATH`` it also listens on a unix socket there, in a
directory only root may enter: the service connects once, and from then on its
requests come and their replies go that way, off the engine's attach stream
(stdin still says when the service is gone). A request is answered where it came
from:

- ``hello`` / ``ping``: liveness and facts about the runner.
- ``exec``: run a program as an untrusted uid, or as root with ``--root``
  (Python fast path for
  ``python3 script.py``), with limits, optionally with a ``peer`` (judge and
  candidate joined by a socket); see :mod:`runner.execute`. With
  ``reset_after`` a second frame follows the reply: the reset's outcome. With
  ``stdins`` (a list) it runs once per stdin, in turn, each run as a separate
  ``exec`` would be (its own process, its limits, leftovers killed after it; the
  files written by the first), and the reply's ``cases`` holds their results (with
  ``stop_on_failure``, up to the first whose status is not ``ok``).
- ``reset`` / ``verify``: kill, wipe and verify; see :mod:`runner.reset`.

It exits when stdin closes, i.e. when the service that attached to it is gone.
"""

from __future__ import annotations

import gc
import os
import resource
import select
import socket
import sys
from typing import TYPE_CHECKING

from . import procs
from .config import Config
from .execute import OK, Executor
from .protocol import ProtocolError, read_frame, write_frame
from .reset import reset, verify
from .zygote import Zygote

if TYPE_CHECKING:
    from typing import Any

PROTOCOL_VERSION = 4
SPARES_AHEAD = 1
_PR_SET_DUMPABLE = 4


class Runner:
    """Serves requests from the channel until it closes."""

    def __init__(self, config: Config, channel_fd: int) -> None:
        self.config = config
        for directory in config.dirs:  # whatever the image or the mount left, start as promised
            if directory.mode is not None:
                os.chmod(directory.path, directory.mode)
        # The zygote's pages stay shared with the spares it forks. It carries every module
        # imported by now, so what only the runner needs (hmac) is imported when needed.
        gc.freeze()
        if config.root:
            _undumpable()  # the zygote and the spares inherit it
        self.zygote = Zygote(config)
        procs.trust(os.getpid())
        procs.trust(self.zygote.pid)
        self.executor = Executor(config, self.zygote, channel_fd)
        # After the zygote's fork: no process that runs code ever holds these.
        self.listener = _listen(config.socket_path) if config.socket_path else None
        self.direct: socket.socket | None = None

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op in ("hello", "ping"):
            return {
                "protocol": PROTOCOL_VERSION,
                "pid": os.getpid(),
                "zygote": self.zygote.pid,
                "python": sys.version.split()[0],
                "uids": self.config.ids,
                "processes": len(procs.processes_of(self.config.untrusted_uids)),
                "socket": self.config.socket_path,
            }
        if op == "exec":
            if "stdins" in request:
                return {"cases": self._exec_cases(request)}
            return self.executor.run(request)
        none_left, self.executor.none_left = self.executor.none_left, False
        if op == "reset":
            return reset(
                self.config,
                self.executor.kill_at_once,
                self.executor.cgroup.memory_bytes,
                none_left=none_left,
            )
        if op == "verify":
            problems = verify(self.config)
            return {"clean": not problems, "problems": problems}
        raise ValueError(f"unknown op {op!r}")

    def _exec_cases(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """Run ``request`` once per entry of its ``stdins``: one message for several cases."""
        stdins: list[str] = request["stdins"]
        replies = []
        for index, stdin in enumerate(stdins):
            if index:
                # A spare warming ahead of the next case, as serve keeps between requests.
                self.zygote.request_spares(1 + SPARES_AHEAD)
            case = {**request, "stdin": stdin, "files": request.get("files") if not index else []}
            replies.append(self.executor.run(case))
            if request.get("stop_on_failure") and replies[-1].get("status") != OK:
                break
        return replies

    def serve(self, in_fd: int, out_fd: int) -> None:
        spares = 1 + SPARES_AHEAD
        self.zygote.request_spares(spares)
        while True:
            request, reply_fd = self._next_request(in_fd, out_fd)
            if request is None:
                return
            write_frame(reply_fd, self._reply(request, request.get("op")))
            if request.get("op") == "exec" and request.get("reset_after"):
                # A second frame, after the reply went out: the reset's outcome.
                write_frame(reply_fd, self._reply(request, "reset"))
            # Have the next execution's processes forked while the service reads the
            # reply: as many as the last execution needed (two for a judge and its peer),
            # and one more, so that the next request finds a spare that has finished
            # warming up rather than one the zygote has only just forked.
            if request.get("op") == "exec":
                spares = (2 if request.get("peer") else 1) + SPARES_AHEAD
            self.zygote.request_spares(spares)

    def _next_request(self, in_fd: int, out_fd: int) -> tuple[dict[str, Any] | None, int]:
        """The next request and the descriptor its reply goes to; ``None`` once stdin ends."""
        while True:
            sources = [in_fd, self.zygote.fileno()]
            sources += [s.fileno() for s in (self.listener, self.direct) if s is not None]
            ready = select.select(sources, [], [])[0]
            # Take spares off the zygote's socket as they come: descriptors in
            # flight count against root's descriptor limit across the whole host.
            if self.zygote.fileno() in ready:
                self.zygote.receive()
            if self.listener is not None and self.listener.fileno() in ready:
                self._accept(self.listener)
            if self.direct is not None and self.direct.fileno() in ready:
                request = read_frame(self.direct.fileno())
                if request is not None:
                    return request, self.direct.fileno()
                self.direct.close()  # the service went back to stdio (or is gone)
                self.direct = None
            if in_fd in ready:
                return read_frame(in_fd), out_fd

    def _accept(self, listener: socket.socket) -> None:
        """Take the service's connection; one at a time (only root can connect at all)."""
        connection, _ = listener.accept()
        if self.direct is not None:
            connection.close()
            return
        connection.setblocking(True)
        self.direct = connection

    def _reply(self, request: dict[str, Any], op: object) -> dict[str, Any]:
        reply: dict[str, Any] = {"id": request.get("id")}
        try:
            reply.update(self.handle({**request, "op": op}))
            reply["ok"] = True
        except Exception as exc:
            import traceback

            traceback.print_exc()
            reply.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        return reply


def _undumpable() -> None:
    """Make this process non-dumpable: a root session's commands (uid 0, without
    CAP_SYS_PTRACE) can then neither trace it nor read its memory or descriptors."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _listen(path: str) -> socket.socket:
    """A listening unix socket at ``path``, its directory made root's alone (0700)."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chown(directory, 0, 0)
    os.chmod(directory, 0o700)
    if os.path.lexists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(1)
    return listener


def main(argv: list[str] | None = None) -> None:
    config = Config(sys.argv[1:] if argv is None else argv)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # untrusted code lowers it
    # The channel is fds 0 and 1; nothing else may write to fd 1.
    in_fd, out_fd = os.dup(0), os.dup(1)
    os.set_inheritable(in_fd, False)
    os.set_inheritable(out_fd, False)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # a stray write to fd 1 must never corrupt the channel
    sys.stdout = sys.stderr
    runner = Runner(config, in_fd)
    try:
        runner.serve(in_fd, out_fd)
    except ProtocolError as exc:
        print(f"runner: protocol error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
