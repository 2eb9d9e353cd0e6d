"""Run commands as the sandbox uid for a verifier running as the judge (``agent-run``).

    python3 -I agent_run_server.py

The peer of a Harbor-style verifier (``run_hidden_tests(agent_run=True)``): the
runner starts it as the sandbox uid, with fd 3 a socket to the judge's test
command, which runs as the judge uid and calls ``agent_run.py`` wherever
Harbor's verifiers call ``setpriv --reuid=10001``. Each request is one message
on fd 3: a 4-byte length and a JSON object (``argv``, ``cwd``) with four
descriptors attached: the caller's stdin, stdout and stderr, and a private
socket. The command runs with those three as its own (as ``setpriv`` would
hand them on), in the caller's working directory, with this server's
environment (the sandbox's: ``setpriv --reset-env``), in a session of its own;
a byte received on the private socket is a signal for its process group; when
it exits, its wait status goes back there as a JSON line. Requests run at once,
each in a thread: a service started by one call keeps running while the next
call talks to it.

Nothing here is trusted: the commands share this uid and can kill the server or
answer in its place, which only gives the verifier wrong answers (a failed
test). They never see the judge's files (``/judge`` is 0700, another uid) except
through a descriptor the verifier chose to hand them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading

MAX_REQUEST_BYTES = 1 << 20
FDS = 4


def _recv_request(connection: socket.socket) -> tuple[dict[str, object], list[int]] | None:
    """One request and its descriptors; None when the judge's side is closed."""
    data, fds, _, _ = socket.recv_fds(connection, MAX_REQUEST_BYTES + 4, FDS)
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    while len(data) < 4 or len(data) < 4 + struct.unpack("!I", data[:4])[0]:
        more = connection.recv(MAX_REQUEST_BYTES)
        if not more:
            break
        data += more
    try:
        request = json.loads(data[4 : 4 + struct.unpack("!I", data[:4])[0]])
    except (ValueError, struct.error):
        request = {}
    return (request if isinstance(request, dict) else {}), fds


def _relay_signals(control: socket.socket, process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        while signum := control.recv(1):
            with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                os.killpg(process.pid, signum[0])


def _serve_one(request: dict[str, object], fds: list[int]) -> None:
    stdin, stdout, stderr, control_fd = fds
    control = socket.socket(fileno=control_fd)
    try:
        argv = [str(part) for part in request.get("argv") or []]  # type: ignore[attr-defined]
        cwd = str(request.get("cwd") or "/")
        try:
            process = subprocess.Popen(
                argv, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr, start_new_session=True
            )
        except (OSError, ValueError, IndexError) as exc:
            os.write(stderr, f"agent-run: cannot run {argv[:1]} in {cwd}: {exc}\n".encode())
            control.sendall(json.dumps({"error": str(exc)}).encode() + b"\n")
            return
        finally:
            for fd in (stdin, stdout, stderr):
                os.close(fd)
        threading.Thread(target=_relay_signals, args=(control, process), daemon=True).start()
        code = process.wait()
        control.sendall(json.dumps({"exit_code": code}).encode() + b"\n")
    except OSError:
        pass  # the caller is gone
    finally:
        control.close()


def main() -> int:
    connection = socket.socket(fileno=3)
    while True:
        try:
            received = _recv_request(connection)
        except OSError:
            return 0
        if received is None:
            return 0
        request, fds = received
        if len(fds) != FDS:
            for fd in fds:
                os.close(fd)
            continue
        threading.Thread(target=_serve_one, args=(request, fds), daemon=True).start()


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
