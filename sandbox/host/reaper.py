"""A watchdog that removes a service's containers (and networks) once it is gone, even by kill -9.

Containers normally remove themselves when the service's attach closes; one
caught between create and start never does. The service starts this small
process in its own session at start-up; it outlives the service, waits for it
to exit, removes whatever still carries the service's owner label, and exits.
A create the service had already sent when it died may land in the engine
after that sweep, so a second sweep follows ``settle_s`` later.

    python3 -m sandbox.host.reaper OWNER_LABEL [SETTLE_S]

It prints one line per container or network it removed, and ``swept`` after
each sweep (the service discards this output; tests read it).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

POLL_INTERVAL_S = 1.0
#: How long after the first sweep the second one runs.
SETTLE_S = 3.0
#: How long the engine may stay unreachable before the watchdog gives up.
ENGINE_RETRY_S = 60.0


def spawn(
    owner: str, *, settle_s: float = SETTLE_S, stdout: int | None = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
    """Start the watchdog for the service process named by ``owner`` (an owner label)."""
    return subprocess.Popen(
        [sys.executable, "-m", "sandbox.host.reaper", owner, str(settle_s)],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def sweep(client: docker.DockerClient, owner: str) -> list[str]:
    """Remove every container, then every network, labelled with ``owner``; their ids."""
    import docker.errors

    from sandbox.host.labels import LABEL_OWNER

    removed = []
    mine: dict[str, str | list[str] | bool] = {"label": f"{LABEL_OWNER}={owner}"}
    for container in client.containers.list(all=True, filters=mine, ignore_removed=True):
        with contextlib.suppress(docker.errors.APIError):  # already going
            container.remove(force=True)
            removed.append(f"container {container.id}")
    for network in client.networks.list(filters=mine):  # allowlist networks, once emptied
        with contextlib.suppress(docker.errors.APIError):
            network.remove()
            removed.append(f"network {network.id}")
    return removed


def _say(*words: str) -> None:
    with contextlib.suppress(OSError):  # nobody reading is no reason to stop
        print(*words, flush=True)


def _sweep_retrying(owner: str) -> None:
    """One sweep, retried while the engine does not answer (a restart, a busy moment)."""
    import docker
    import requests

    deadline = time.monotonic() + ENGINE_RETRY_S
    while True:
        try:
            client = docker.from_env(timeout=60)
            try:
                for line in sweep(client, owner):
                    _say("removed", line)
            finally:
                client.close()
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(POLL_INTERVAL_S)
            continue
        _say("swept")
        return


def main(argv: list[str] | None = None) -> int:
    from sandbox.host.labels import owner_alive

    args = sys.argv[1:] if argv is None else argv
    owner = args[0]
    settle_s = float(args[1]) if len(args) > 1 else SETTLE_S
    while owner_alive(owner):
        time.sleep(POLL_INTERVAL_S)
    _sweep_retrying(owner)
    time.sleep(settle_s)
    _sweep_retrying(owner)
    return 0


if __name__ == "__main__":
    sys.exit(main())
