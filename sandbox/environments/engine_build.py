"""One build with the engine's classic builder, run in a child process so it can be stopped.

The engine ties a build to its client's connection: when the connection goes, it
cancels the build and kills the step's container. A build's own output cannot be
trusted to name that container (a step prints what it likes), so the build is not
stopped through anything it printed: :func:`run_build` starts this module as a child
process, reads its chunks, and kills the child when the time is up; the kernel then
closes the child's connection and the engine does the rest.

The child reads its arguments (``docker.APIClient.build``'s keyword arguments, the
network and memory limits of the steps among them) as one JSON object on stdin and
writes each chunk the engine streams as one JSON line on stdout.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

from sandbox.errors import EngineError

#: How long a killed build's child gets to go before the parent stops waiting for it.
CHILD_EXIT_S = 10


class BuildExpired(Exception):
    """The build ran past its time and was stopped."""


def run_build(arguments: dict[str, Any], timeout_s: float) -> Iterator[dict[str, Any]]:
    """The chunks of the build ``arguments`` describe (``docker.APIClient.build``'s keyword
    arguments, JSON-able); raises :class:`BuildExpired` once ``timeout_s`` has passed, with
    the build stopped. A failed step comes as a chunk with ``error``; an engine that
    cannot build at all raises :class:`~sandbox.errors.EngineError`."""
    child = subprocess.Popen(
        [sys.executable, "-m", __name__],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        child.kill()

    watchdog = threading.Timer(timeout_s, expire)
    watchdog.daemon = True
    try:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(json.dumps(arguments))
        child.stdin.close()
        watchdog.start()
        for line in child.stdout:
            if expired.is_set():
                break
            try:
                chunk = json.loads(line)
            except ValueError:
                continue
            if not isinstance(chunk, dict):
                continue
            if "engine_error" in chunk:
                raise EngineError(f"the engine could not build: {chunk['engine_error']}")
            yield chunk
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(CHILD_EXIT_S)
    if expired.is_set():
        raise BuildExpired(f"stopped after {timeout_s:g} s")
    if child.returncode != 0:
        assert child.stderr is not None
        raise EngineError(
            f"the build's client ended with status {child.returncode}: "
            + child.stderr.read()[-2000:].strip()
        )


def _child() -> None:
    import docker
    import requests
    from docker.errors import DockerException

    from sandbox.host.engine import docker_client
    from sandbox.host.images import BUILD_HTTP_TIMEOUT_S

    arguments = json.loads(sys.stdin.read())
    # The build API takes a cgroup parent (:mod:`.build_cgroup`); docker-py passes
    # ``container_limits`` through as the build's parameters but knows only four keys.
    known = docker.constants.CONTAINER_LIMITS_KEYS
    given = arguments.get("container_limits", {})
    docker.constants.CONTAINER_LIMITS_KEYS = [*known, *(k for k in given if k not in known)]  # type: ignore[misc]
    try:
        client = docker_client(timeout=BUILD_HTTP_TIMEOUT_S)
        try:
            for chunk in client.api.build(decode=True, **arguments):
                sys.stdout.write(json.dumps(chunk) + "\n")
                sys.stdout.flush()
        finally:
            client.close()
    except (DockerException, requests.exceptions.RequestException) as exc:
        sys.stdout.write(json.dumps({"engine_error": str(exc)}) + "\n")


if __name__ == "__main__":
    _child()
