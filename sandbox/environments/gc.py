"""Garbage collection of built environments: least recently used first, under a disk budget.

An environment's size is what its image adds to the image it was built from
(recorded at build time), so the shared base images are not counted. An image
a running container uses is never removed.

What builds leave untagged (the steps of a failed build, the stages before the last
of a multi-stage build: childless untagged images descended from an image builds
start from) is removed after each build by :func:`remove_leftovers`, when no other
build on this machine is running (:data:`BUILDS_LOCK`): a running build's last step
is such an image until its next step starts.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import requests
from docker.errors import APIError, DockerException, ImageNotFound

from sandbox.errors import EngineError
from sandbox.host.engine import docker_client

from .store import RecordStore

logger = logging.getLogger(__name__)

BUILDS_LOCK = Path("/run/lock" if Path("/run/lock").is_dir() else "/tmp") / "sandbox-builds.lock"
"""Every environment build holds it shared; removing leftovers takes it exclusive."""
#: Our images' repositories (sandbox-env, sandbox-python, ...) start so.
OUR_REPOSITORIES = "sandbox-"


def remove_leftovers(bases: Collection[str] = ()) -> int:
    """Remove the untagged images no image is built on that descend from ours or from
    ``bases`` (the alias targets); returns how many. Call it holding
    :data:`BUILDS_LOCK` exclusively (no build on this machine running)."""
    client = docker_client()
    removed = 0
    try:
        listed = client.api.images(all=True)
        parents = {str(i["Id"]): str(i.get("ParentId") or "") for i in listed}
        built_on = set(parents.values())
        roots = {
            str(i["Id"])
            for i in listed
            if any(t.startswith(OUR_REPOSITORIES) or t in bases for t in _tags(i))
        }
        for image in listed:
            image_id = str(image["Id"])
            if _tags(image) or image_id in built_on or not _descends(image_id, parents, roots):
                continue
            try:
                client.api.remove_image(image_id)  # with its untagged, childless ancestors
            except (ImageNotFound, APIError):  # gone, or a container holds it
                continue
            removed += 1
        return removed
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise EngineError(f"cannot remove what builds left: {exc}") from exc
    finally:
        client.close()


def _tags(image: Mapping[str, Any]) -> list[str]:
    return [t for t in image.get("RepoTags") or () if t != "<none>:<none>"]


def _descends(image_id: str, parents: Mapping[str, str], roots: Collection[str]) -> bool:
    seen: set[str] = set()
    current = parents.get(image_id, "")
    while current and current not in seen:
        if current in roots:
            return True
        seen.add(current)
        current = parents.get(current, "")
    return False


def collect(records: RecordStore, budget_bytes: int, *, keep: Collection[str] = ()) -> list[str]:
    """Remove environments, least recently used first, until they fit ``budget_bytes``.

    ``keep`` (ids) and those a running container uses stay. Returns the removed ids.
    """
    client = docker_client()
    try:
        # One listing, no inspect per container: one that goes meanwhile is no error.
        in_use = {str(c.get("ImageID", "")) for c in client.api.containers()}
        present = []
        for record in sorted(records.all(), key=lambda r: r.last_used_at):
            try:
                image_id = str(client.images.get(record.image).id)
            except ImageNotFound:
                records.remove(record.environment)
                continue
            present.append((record, image_id))
        total = sum(record.size_bytes for record, _ in present)
        removed: list[str] = []
        for record, image_id in present:
            if total <= budget_bytes:
                break
            if record.environment in keep or image_id in in_use:
                continue
            try:
                client.images.remove(record.image)
            except ImageNotFound:
                pass
            except APIError as exc:  # a container (created meanwhile) holds it
                logger.info("keeping environment %s: %s", record.environment, exc)
                continue
            records.remove(record.environment)
            total -= record.size_bytes
            removed.append(record.environment)
        return removed
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise EngineError(f"cannot collect environments: {exc}") from exc
    finally:
        client.close()
