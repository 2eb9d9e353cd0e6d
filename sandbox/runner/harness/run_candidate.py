"""Run the candidate's program from a judge's test command (``isolate_candidate``).

    $RUN_CANDIDATE [--timeout SECONDS] [ARGS...] < input > output

The test command runs as the judge uid; the candidate's program runs as the
sandbox uid, started by ``program_server.py`` (the peer at the other end of the
socket on fd 3) with the language's run command plus ARGS, this process's stdin
as its stdin. Its stdout and stderr come out here, and its exit status is this
process's: 124 when it ran out of time, 125 when it printed more than the cap,
could not start, or the server did not answer.

What comes back is the candidate's output: data for the test to check (print it
with ``%q`` or the like, never as a line of the report), not evidence of
anything. Calls from several processes of the command take turns (a lock in
``/judge``); a reply carries the id of its request, so one left behind by a
caller that was killed is skipped.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import secrets
import socket
import sys

LOCK = "/judge/.run-candidate.lock"
MAX_REPLY_BYTES = 64 << 20
TIMEOUT_EXIT = 124
FAILED_EXIT = 125


def main(argv: list[str]) -> int:
    timeout_s = None
    if argv[:1] == ["--timeout"] and len(argv) >= 2:
        timeout_s, argv = float(argv[1]), argv[2:]
    stdin = sys.stdin.buffer.read()
    ident = secrets.token_hex(16)
    request: dict[str, object] = {
        "id": ident,
        "args": argv,
        "stdin": base64.b64encode(stdin).decode(),
    }
    if timeout_s is not None:
        request["timeout_s"] = timeout_s
    try:
        connection = socket.socket(fileno=os.dup(3))
    except OSError:
        print("run_candidate: no program server (fd 3 is not its socket)", file=sys.stderr)
        return FAILED_EXIT
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            connection.sendall(json.dumps(request).encode() + b"\n")
            reader = connection.makefile("rb")
            while True:
                line = reader.readline(MAX_REPLY_BYTES)
                if not line:
                    print("run_candidate: the program server is gone", file=sys.stderr)
                    return FAILED_EXIT
                try:
                    reply = json.loads(line)
                except ValueError:
                    continue  # the end of a reply to a caller that was killed
                if isinstance(reply, dict) and reply.get("id") == ident:
                    break
        except OSError as exc:
            print(f"run_candidate: the program server is gone ({exc})", file=sys.stderr)
            return FAILED_EXIT
    sys.stdout.buffer.write(base64.b64decode(reply.get("stdout") or ""))
    sys.stdout.flush()
    sys.stderr.buffer.write(base64.b64decode(reply.get("stderr") or ""))
    sys.stderr.flush()
    status = reply.get("status")
    if status == "exited":
        return int(reply.get("exit_code", FAILED_EXIT)) & 0xFF
    if status == "timeout":
        print("run_candidate: the program ran out of time", file=sys.stderr)
        return TIMEOUT_EXIT
    print(f"run_candidate: the program {status}", file=sys.stderr)
    return FAILED_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
