"""Run the candidate's program for a judge's test command, as the sandbox uid.

    python3 -I program_server.py RUN_ARGV_JSON DEFAULT_TIMEOUT_S

The peer of a ``command`` test with ``isolate_candidate``: the runner starts it
as the sandbox uid in ``/workspace`` (where the candidate's code was written and
built), with fd 3 a socket to the judge's command, which runs as the judge uid
in ``/judge`` and calls ``run_candidate.py`` once per run of the program. Each
request (one JSON line: an id, arguments, stdin, a timeout) runs the language's
run command plus the arguments once, in a process group of its own, stdin from
a memfd; the reply (one JSON line) carries the id, the exit status (or
``timeout`` / ``output_limit``) and stdout and stderr, each capped.

Nothing here is trusted. The candidate's processes share this uid: they can
kill this server or answer in its place, which gives the test command no output
or wrong output, hence failed tests; they can never read the judge's files
(``/judge`` is 0700, another uid), signal or trace its processes, or write its
report.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from typing import Any

WORKDIR = "/workspace"
MAX_OUTPUT_BYTES = 8 << 20
MAX_REQUEST_BYTES = 64 << 20
CHUNK = 65536


def run_once(argv: list[str], stdin: bytes, timeout_s: float) -> dict[str, Any]:
    """Run ``argv`` once; its status and capped output."""
    stdin_fd = os.memfd_create("stdin")
    os.write(stdin_fd, stdin)
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    try:
        process = subprocess.Popen(
            argv,
            cwd=WORKDIR,
            stdin=stdin_fd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return {"status": "error", "stderr": _b64(f"cannot start {argv[0]}: {exc}\n".encode())}
    finally:
        os.close(stdin_fd)
    assert process.stdout is not None and process.stderr is not None
    outputs = {process.stdout: bytearray(), process.stderr: bytearray()}
    selector = selectors.DefaultSelector()
    for stream in outputs:
        selector.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    status = "exited"
    while selector.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            status = "timeout"
            break
        ready = selector.select(min(remaining, 0.05))
        if not ready and process.poll() is not None:
            break  # it exited, and whatever it left running holds its pipes open
        for key, _ in ready:
            data = os.read(key.fd, CHUNK)
            if not data:
                selector.unregister(key.fileobj)
                continue
            buffer = outputs[key.fileobj]  # type: ignore[index]
            buffer += data
            if len(buffer) > MAX_OUTPUT_BYTES:
                status = "output_limit"
                break
        if status != "exited":
            break
    if status != "exited":
        _kill_group(process.pid)
    else:
        status = _drain(selector, outputs)
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            status = "timeout"
    _kill_group(process.pid)  # whatever it left in its group
    process.wait()
    for stream in outputs:
        stream.close()
    reply: dict[str, Any] = {
        "status": status,
        "stdout": _b64(bytes(outputs[process.stdout][:MAX_OUTPUT_BYTES])),
        "stderr": _b64(bytes(outputs[process.stderr][:MAX_OUTPUT_BYTES])),
    }
    if status == "exited":
        code = process.returncode
        reply["exit_code"] = code if code >= 0 else 128 - code
    return reply


def _drain(selector: selectors.BaseSelector, outputs: dict[Any, bytearray]) -> str:
    """Read what the pipes still hold without waiting: the program has exited, but a
    readiness report can lag its last write (seen under gVisor), and what it left running
    may hold the pipes open. Returns the status: ``exited``, or ``output_limit``."""
    for key in list(selector.get_map().values()):
        os.set_blocking(key.fd, False)
        buffer = outputs[key.fileobj]
        while True:
            try:
                data = os.read(key.fd, CHUNK)
            except BlockingIOError:
                break
            if not data:
                break
            buffer += data
            if len(buffer) > MAX_OUTPUT_BYTES:
                return "output_limit"
    return "exited"


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def serve(connection: socket.socket, run: list[str], default_timeout_s: float) -> None:
    reader = connection.makefile("rb")
    while True:
        line = reader.readline(MAX_REQUEST_BYTES)
        if not line:
            return
        try:
            request = json.loads(line)
            ident = str(request["id"])
            args = [str(arg) for arg in request.get("args") or []]
            stdin = base64.b64decode(request.get("stdin") or "")
            timeout_s = float(request.get("timeout_s") or default_timeout_s)
        except (ValueError, KeyError, TypeError):
            continue  # the rest of a request cut short: the next line is whole
        reply = run_once([*run, *args], stdin, timeout_s)
        reply["id"] = ident
        connection.sendall(json.dumps(reply).encode() + b"\n")


def main(argv: list[str]) -> int:
    run = [str(part) for part in json.loads(argv[0])]
    default_timeout_s = float(argv[1])
    connection = socket.socket(fileno=3)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        serve(connection, run, default_timeout_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
