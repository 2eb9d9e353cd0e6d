"""The labels that mark this platform's containers and networks, and whose they are.

Every container and network a service creates carries ``LABEL_MANAGED`` and
``LABEL_OWNER`` (``host:pid:start-time`` of the service): the reaper removes a
dead owner's, and a service sweeps the ones whose owner no longer runs.
"""

from __future__ import annotations

import re
import socket

import psutil

LABEL_MANAGED = "sandbox-platform.managed"
LABEL_OWNER = "sandbox-platform.owner"
LABEL_POLICY = "sandbox-platform.policy"
LABEL_POLICY_DIGEST = "sandbox-platform.policy-digest"
ENV_REPOSITORY = "sandbox-env"
"""The repository of built task environments' images (``sandbox-env:<id>``)."""
ENV_POLICY_MARK = ".env-"
"""Between a base policy's name and an environment's id in the policy it derives."""
_ENVIRONMENT_ID = re.compile(
    rf"({re.escape(ENV_REPOSITORY)}:|{re.escape(ENV_POLICY_MARK)})[0-9a-f]{{12}}"
)


def environment_in(value: str) -> str | None:
    """The environment id in ``value`` (an image or policy name), or None."""
    found = _ENVIRONMENT_ID.search(value)
    return found.group(0)[-12:] if found else None


def public_label(value: str) -> str:
    """``value`` (an image or policy name) with any environment id taken out.

    An environment's id opens it for the tenants that built it only, so views that
    several tenants or no key can read (metrics, the console's overview) show
    ``sandbox-env`` and ``<policy>.env`` instead.
    """
    return _ENVIRONMENT_ID.sub(lambda m: m.group(1).rstrip(":-"), value)


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
