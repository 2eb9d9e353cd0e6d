"""``agent-run CMD [ARGS...]``: run CMD as the sandbox uid from a verifier running as the judge.

What ``setpriv --reuid=10001 ... --reset-env -- CMD`` does in a Harbor
verifier running as root, for a verifier that runs as the judge uid: CMD runs
as the sandbox uid, in this process's working directory (which that uid must
be able to enter), with this process's stdin, stdout and stderr, the sandbox's
environment, and its exit status is this process's (128+N when signal N ended
it; 125 when it could not run or the server did not answer). SIGTERM, SIGINT,
SIGHUP and SIGQUIT sent here are passed on to CMD's process group.

The command is started by ``agent_run_server.py``, the peer at the other end
of the socket on fd 3 (a descriptor Python's ``subprocess`` closes unless
``pass_fds=(3,)``). Calls from several processes take turns only to send their
request (a lock in ``/judge``); the commands then run at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import struct
import sys

LOCK = "/judge/.agent-run.lock"
FAILED_EXIT = 125
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: agent-run CMD [ARGS...]", file=sys.stderr)
        return 2
    try:
        server = socket.socket(fileno=os.dup(3))
    except OSError:
        print("agent-run: no agent-run server (fd 3 is not its socket)", file=sys.stderr)
        return FAILED_EXIT
    mine, theirs = socket.socketpair()
    body = json.dumps({"argv": argv, "cwd": os.getcwd()}).encode()
    try:
        with open(LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            socket.send_fds(
                server, [struct.pack("!I", len(body)) + body], [0, 1, 2, theirs.fileno()]
            )
    except OSError as exc:
        print(f"agent-run: the server is gone ({exc})", file=sys.stderr)
        return FAILED_EXIT
    theirs.close()
    server.close()
    for signum in FORWARDED:
        signal.signal(signum, lambda number, _frame: mine.send(bytes([number])))
    reply = b""
    while not reply.endswith(b"\n"):
        try:
            chunk = mine.recv(4096)
        except InterruptedError:
            continue
        if not chunk:
            break
        reply += chunk
    try:
        answer = json.loads(reply)
        code = int(answer["exit_code"])
    except (ValueError, KeyError, TypeError):
        if not reply:
            print("agent-run: the server gave no exit status", file=sys.stderr)
        return FAILED_EXIT
    return 128 - code if code < 0 else code & 0xFF


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
