"""The labels that mark this platform's containers and networks, and whose they are.

Every container and network a service creates carries ``LABEL_MANAGED`` and
``LABEL_OWNER`` (``host:pid:start-time`` of the service): the reaper removes a
dead owner's, and a service sweeps the ones whose owner no longer runs.
"""

from __future__ import annotations

import socket

import psutil

LABEL_MANAGED = "sandbox-platform.managed"
LABEL_OWNER = "sandbox-platform.owner"
LABEL_POLICY = "sandbox-platform.policy"
LABEL_POLICY_DIGEST = "sandbox-platform.policy-digest"


def owner_label() -> str:
    """``host:pid:start-time`` of this process: unique, and checkable for liveness later."""
    me = psutil.Process()
    return f"{socket.gethostname()}:{me.pid}:{me.create_time():.3f}"


def owner_alive(label: str) -> bool:
    """Whether the process an ``owner_label`` names still runs (other hosts: assumed)."""
    host, _, rest = label.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname():
        return True  # another machine's service: not ours to judge
    try:
        process = psutil.Process(int(pid_text))
        return f"{process.create_time():.3f}" == started
    except (psutil.NoSuchProcess, ValueError):
        return False
