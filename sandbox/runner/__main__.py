"""The runner: a persistent process inside every sandbox container.

Started as ``python3 -m runner --uid U --gid G --dir /workspace:755 ...`` by the
backend, as root with only the capabilities needed to drop privileges and to
kill the untrusted uid. It reads length-prefixed JSON requests on stdin and
answers on stdout (the container's attached stdio: no host path is part of the
channel), one request at a time:

- ``hello`` / ``ping``: liveness and facts about the runner.
- ``exec``: run a program as the untrusted uid (Python fast path for
  ``python3 script.py``), with limits; see :mod:`runner.execute`. With
  ``reset_after`` a second frame follows the reply: the reset's outcome.
- ``reset``: kill, wipe and verify; see :mod:`runner.reset`.

It exits when stdin closes, i.e. when the service that attached to it is gone.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from typing import TYPE_CHECKING

from . import procs
from .execute import Executor
from .protocol import ProtocolError, read_frame, write_frame
from .reset import WritableDir, reset, verify

if TYPE_CHECKING:
    from typing import Any

PROTOCOL_VERSION = 1


def _parse_args(argv: list[str]) -> tuple[int, int, list[WritableDir]]:
    """``--uid U --gid G [--dir PATH[:OCTAL_MODE]]...`` (no argparse: it is big to fork)."""
    uid = gid = None
    dirs = []
    pairs = iter(argv)
    for flag in pairs:
        value = next(pairs, None)
        if value is None:
            raise SystemExit(f"runner: {flag} needs a value")
        if flag == "--uid":
            uid = int(value)
        elif flag == "--gid":
            gid = int(value)
        elif flag == "--dir":
            dirs.append(WritableDir(value))
        else:
            raise SystemExit(f"runner: unknown option {flag}")
    if uid is None or gid is None:
        raise SystemExit("runner: --uid and --gid are required")
    return uid, gid, dirs


class Runner:
    """Serves requests from the channel until it closes."""

    def __init__(self, uid: int, gid: int, dirs: list[WritableDir]) -> None:
        if uid == 0 or uid == os.getuid():
            raise SystemExit("runner: the untrusted uid must differ from the runner's own")
        self.uid = uid
        self.gid = gid
        self.dirs = dirs
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        self.executor = Executor(uid, gid, wake_r)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op in ("hello", "ping"):
            return {
                "protocol": PROTOCOL_VERSION,
                "pid": os.getpid(),
                "python": sys.version.split()[0],
                "uid": self.uid,
                "processes": len(procs.processes_of(self.uid)),
            }
        if op == "exec":
            return self.executor.run(request)
        if op == "reset":
            return reset(self.uid, self.gid, self.dirs)
        if op == "verify":
            problems = verify(self.uid, self.dirs)
            return {"clean": not problems, "problems": problems}
        raise ValueError(f"unknown op {op!r}")

    def serve(self, in_fd: int, out_fd: int) -> None:
        gc.freeze()  # keep the forked children's pages shared
        while True:
            request = read_frame(in_fd)
            if request is None:
                return
            write_frame(out_fd, self._reply(request, request.get("op")))
            if request.get("op") == "exec" and request.get("reset_after"):
                # A second frame, after the reply went out: the reset's outcome.
                write_frame(out_fd, self._reply(request, "reset"))
            # Fork the next execution's process now, while the service reads the reply.
            self.executor.prepare_spare()

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


def main(argv: list[str] | None = None) -> None:
    uid, gid, dirs = _parse_args(sys.argv[1:] if argv is None else argv)
    # The channel is fds 0 and 1; nothing else may write to fd 1.
    in_fd, out_fd = os.dup(0), os.dup(1)
    os.set_inheritable(in_fd, False)
    os.set_inheritable(out_fd, False)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # a stray write to fd 1 must never corrupt the channel
    sys.stdout = sys.stderr
    runner = Runner(uid, gid, dirs)
    try:
        runner.serve(in_fd, out_fd)
    except ProtocolError as exc:
        print(f"runner: protocol error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
