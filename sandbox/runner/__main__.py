"""The runner: a persistent process inside every sandbox container.

Started as ``python3 -m runner --uid U --gid G --dir /workspace:755 ...`` by the
backend, as root with only the capabilities needed to drop privileges and to
kill the untrusted uid. It reads length-prefixed JSON requests on stdin and
answers on stdout (the container's attached stdio: no host path is part of the
channel), one request at a time:

- ``hello`` / ``ping``: liveness and facts about the runner.
- ``exec``: run a program as the untrusted uid (Python fast path for
  ``python3 script.py``), with limits; see :mod:`runner.execute`.
- ``reset``: kill, wipe and verify; see :mod:`runner.reset`.

It exits when stdin closes, i.e. when the service that attached to it is gone.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import traceback
from typing import Any

from . import procs
from .execute import Executor
from .protocol import ProtocolError, read_frame, write_frame
from .reset import WritableDir, reset, verify

PROTOCOL_VERSION = 1


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="runner")
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--gid", type=int, required=True)
    parser.add_argument("--dir", action="append", default=[], help="PATH[:OCTAL_MODE]")
    return parser.parse_args(argv)


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
            reply: dict[str, Any] = {"id": request.get("id")}
            try:
                reply.update(self.handle(request))
                reply["ok"] = True
            except Exception as exc:
                traceback.print_exc()
                reply.update(ok=False, error=f"{type(exc).__name__}: {exc}")
            write_frame(out_fd, reply)
            # Fork the next execution's process now, while the service reads the reply.
            self.executor.prepare_spare()


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    # The channel is fds 0 and 1; nothing else may write to fd 1.
    in_fd, out_fd = os.dup(0), os.dup(1)
    os.set_inheritable(in_fd, False)
    os.set_inheritable(out_fd, False)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # a stray write to fd 1 must never corrupt the channel
    sys.stdout = sys.stderr
    runner = Runner(args.uid, args.gid, [WritableDir(spec) for spec in args.dir])
    try:
        runner.serve(in_fd, out_fd)
    except ProtocolError as exc:
        print(f"runner: protocol error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
