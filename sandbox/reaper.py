"""A watchdog that removes a service's containers (and networks) once it is gone, even by kill -9.

Containers normally remove themselves when the service's attach closes; one
caught between create and start never does. The service starts this small
process in its own session at start-up; it outlives the service, waits for it
to exit, removes whatever still carries the service's owner label, and exits.

    python3 -m sandbox.reaper OWNER_LABEL
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time

POLL_INTERVAL_S = 1.0


def spawn(owner: str) -> subprocess.Popen[bytes]:
    """Start the watchdog for the service process named by ``owner`` (an owner label)."""
    return subprocess.Popen(
        [sys.executable, "-m", "sandbox.reaper", owner],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def main(argv: list[str] | None = None) -> int:
    import docker

    from .backends.docker import LABEL_OWNER, owner_alive

    (owner,) = sys.argv[1:] if argv is None else argv
    while owner_alive(owner):
        time.sleep(POLL_INTERVAL_S)
    client = docker.from_env(timeout=60)
    mine: dict[str, str | list[str] | bool] = {"label": f"{LABEL_OWNER}={owner}"}
    for container in client.containers.list(all=True, filters=mine):
        with contextlib.suppress(docker.errors.APIError):  # already going
            container.remove(force=True)
    for network in client.networks.list(filters=mine):  # allowlist networks, once emptied
        with contextlib.suppress(docker.errors.APIError):
            network.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
