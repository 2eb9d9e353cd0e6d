"""The policy a task environment runs under: its base policy, narrowed by the task's request.

Never looser than the base: a request above the base's bound is lowered to it
(and a note says so), a host the base's network rules do not allow is dropped,
and everything else (hardening, users, filesystem layout, runtime) is the
base's. ``root`` is allowed only when the base runs gVisor (``runsc``) and the
engine has that runtime registered: the policy's ``user.root`` then runs commands
as uid 0 in a container of the session's own (:data:`ROOT_NOTE` says what that means).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import requests
from docker.errors import DockerException
from pydantic import ValidationError

from sandbox.errors import EngineError, InvalidRequestError
from sandbox.host.engine import RUNTIME_RUNSC, docker_client
from sandbox.policy import AllowRule, Policy
from sandbox.policy.limits import (
    MIN_CPUS,
    MIN_MEMORY_MB,
    MIN_TMPFS_MB,
    PROTECTED_ENV_NAMES,
    WORKSPACE_PATH,
)

from .spec import ResourceRequest

ROOT_NOTE = (
    "commands run as root under gVisor, in a container that is this session's alone and "
    "is destroyed when it ends; files written outside the tmpfs mounts count against the "
    "memory limit; hidden tests never run in it: a fresh session of the environment is "
    "given the work (docs/security.md, 'Root inside the sandbox')"
)

#: Sandboxes of one environment kept warm (a first use warms its pool).
ENVIRONMENT_POOL_WARM = 1


def runsc_registered() -> bool:
    """Whether the engine has the gVisor runtime (``docker info`` lists ``runsc``)."""
    client = docker_client()
    try:
        return RUNTIME_RUNSC in (client.info().get("Runtimes") or {})
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise EngineError(f"cannot ask the engine for its runtimes: {exc}") from exc
    finally:
        client.close()


def check_root(base: Policy, *, runsc: Callable[[], bool] = runsc_registered) -> None:
    """Refuse root unless ``base`` runs under gVisor on a host that has it."""
    if base.runtime != "runsc":
        raise InvalidRequestError(
            f"the task asks for root, which is allowed only under gVisor (runtime runsc), "
            f"never under runc; policy {base.name!r} runs runc: use a runsc policy such as "
            "'gvisor'"
        )
    if not runsc():
        raise InvalidRequestError(
            "the task asks for root, which is allowed only under gVisor, and this host's "
            "Docker engine has no runsc runtime (`docker info` lists none); run `make setup` "
            "(or `sandbox engine ensure`) to register it"
        )


def _lower(name: str, requested: float, bound: float, minimum: float, notes: list[str]) -> float:
    if requested > bound:
        notes.append(f"{name} {requested:g} was lowered to the base policy's {bound:g}")
        return bound
    if requested < minimum:
        notes.append(f"{name} {requested:g} was raised to the smallest allowed, {minimum:g}")
        return minimum
    return requested


def _allowed(host: str, rule: AllowRule) -> bool:
    if rule.host is not None:
        return rule.host == host
    if rule.domain is not None:
        if rule.domain.startswith("*."):
            return host.endswith(rule.domain[1:])
        return host == rule.domain
    return False


def _network(base: Policy, hosts: tuple[str, ...], notes: list[str]) -> dict[str, Any]:
    if not hosts:
        return {"mode": "none", "allow": ()}
    rules = []
    for host in hosts:
        match = next((r for r in base.network.allow if _allowed(host, r)), None)
        if match is None:
            notes.append(
                f"network access to {host} was dropped: base policy {base.name!r} "
                + ("allows no network" if base.network.mode == "none" else "does not allow it")
            )
        else:
            rules.append({"host": host, "ports": match.ports})
    if not rules:
        return {"mode": "none", "allow": ()}
    return {"mode": "allowlist", "allow": tuple(rules)}


def derive_policy(
    base: Policy,
    request: ResourceRequest | None,
    *,
    environment: str,
    env: Mapping[str, str] | None = None,
    root: bool = False,
    seed: str | None = None,
    runsc: Callable[[], bool] = runsc_registered,
) -> tuple[Policy, list[str]]:
    """The policy for ``environment`` from ``base`` and the task's request, and the notes.

    ``seed`` (the image's WORKDIR, see the build) gets a tmpfs sized like the workspace.
    """
    request = request or ResourceRequest()
    notes: list[str] = []
    if root:
        check_root(base, runsc=runsc)
        notes.append(ROOT_NOTE)
    data = base.model_dump()
    resources = data["resources"]
    if request.cpus is not None:
        resources["cpus"] = _lower("cpus", request.cpus, base.resources.cpus, MIN_CPUS, notes)
    if request.memory_mb is not None:
        resources["memory_mb"] = int(
            _lower("memory_mb", request.memory_mb, base.resources.memory_mb, MIN_MEMORY_MB, notes)
        )
    if request.storage_mb is not None:
        workspace = base.filesystem.workspace.size_mb
        data["filesystem"]["workspace"]["size_mb"] = int(
            _lower("storage_mb", request.storage_mb, workspace, MIN_TMPFS_MB, notes)
        )
    data["network"] = _network(base, request.network_allow, notes)
    if seed is not None and seed != WORKSPACE_PATH:
        workspace = data["filesystem"]["workspace"]
        extra = {"path": seed, "size_mb": workspace["size_mb"], "inodes": workspace["inodes"]}
        data["filesystem"]["extra_tmpfs"] = (*data["filesystem"]["extra_tmpfs"], extra)
    if env:
        protected = sorted(set(env) & PROTECTED_ENV_NAMES)
        if protected:
            raise InvalidRequestError(
                f"env may not set {', '.join(protected)}: interpreter start-up hooks are "
                "never taken from a task; remove them"
            )
        data["env"]["set"] = {**base.env.set, **env}
    data["user"]["root"] = root or base.user.root
    data["pool"]["warm"] = min(base.pool.warm, ENVIRONMENT_POOL_WARM)
    data["name"] = f"{base.name}.env-{environment}"
    roots = [mount.source for mount in base.filesystem.mounts]
    try:
        policy = Policy.model_validate(data, strict=False, context={"mount_allowlist": roots})
    except ValidationError as exc:
        raise InvalidRequestError(f"the environment's settings are refused: {exc}") from None
    return policy, notes
