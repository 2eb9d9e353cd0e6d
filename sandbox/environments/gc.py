"""Garbage collection of built environments: least recently used first, under a disk budget.

An environment's size is what its image adds to the image it was built from
(recorded at build time), so the shared base images are not counted. An image
a running container uses is never removed.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

import requests
from docker.errors import APIError, DockerException, ImageNotFound

from sandbox.errors import EngineError
from sandbox.host.engine import docker_client

from .store import RecordStore

logger = logging.getLogger(__name__)


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
