"""Built environments: their records on disk (image, times, notes, build log).

Each environment is ``<id>.json`` (its :class:`EnvironmentRecord`), ``<id>.log``
(the whole build output) and ``<id>.tenants`` (who may use it) in the store's
directory. The id is the content hash of the build's inputs, so a record is
found again by building the same inputs; ``last_used_at`` orders garbage
collection.

An id opens an environment only for the tenants that built it: a tenant that
builds the same inputs is added (it shows that it has them, so the build is
shared, not repeated), and to every other tenant the id is unknown, answered as
an id never built (:meth:`RecordStore.get` with ``tenant``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from sandbox.errors import NotFoundError
from sandbox.host.files import write_text_atomic
from sandbox.host.labels import ENV_REPOSITORY

logger = logging.getLogger(__name__)

__all__ = ["ENV_REPOSITORY", "LABEL_ENVIRONMENT", "EnvironmentRecord", "RecordStore", "check_id"]

LABEL_ENVIRONMENT = "sandbox.environment"
_ID = re.compile(r"^[0-9a-f]{12}$")


class EnvironmentRecord(BaseModel):
    """A built environment, as ``GET /v1/environments/{id}`` answers it."""

    model_config = ConfigDict(extra="forbid")

    environment: str
    image: str
    bases: list[str]
    workdir: str
    seed: str | None = None
    size_bytes: int
    build_seconds: float
    created_at: float
    last_used_at: float
    notes: list[str]
    log_tail: str


def check_id(environment: str) -> str:
    """``environment`` if it has the form of an id, else :class:`NotFoundError`."""
    if not _ID.fullmatch(environment):
        raise NotFoundError(
            f"no environment {environment[:40]!r}; build one with POST /v1/environments"
        )
    return environment


class RecordStore:
    """The records and logs under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)

    def record_path(self, environment: str) -> Path:
        return self.directory / f"{check_id(environment)}.json"

    def log_path(self, environment: str) -> Path:
        return self.directory / f"{check_id(environment)}.log"

    def lock_path(self, environment: str) -> Path:
        return self.directory / f"{check_id(environment)}.lock"

    def tenants_path(self, environment: str) -> Path:
        return self.directory / f"{check_id(environment)}.tenants"

    def get(self, environment: str, *, tenant: str | None = None) -> EnvironmentRecord:
        """The record of ``environment``; :class:`NotFoundError` if never built here, or,
        given ``tenant``, never built by that tenant (the same answer: an id is no oracle)."""
        path = self.record_path(environment)
        unknown = NotFoundError(
            f"no environment {environment!r}; build one with POST /v1/environments"
        )
        if tenant is not None and tenant not in self.tenants(environment):
            raise unknown
        try:
            return EnvironmentRecord.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            raise unknown from None
        except (OSError, ValidationError) as exc:
            raise NotFoundError(f"environment {environment!r} has a broken record: {exc}") from None

    def put(self, record: EnvironmentRecord) -> None:
        """Write ``record`` whole (concurrent builds of one environment may both write it)."""
        path = self.record_path(record.environment)
        write_text_atomic(path, record.model_dump_json(indent=1))

    def tenants(self, environment: str) -> set[str]:
        """The tenants that built ``environment`` (none: unknown, or built before tenants
        were recorded, and then nobody's)."""
        try:
            text = self.tenants_path(environment).read_text()
        except FileNotFoundError:
            return set()
        return {line for line in text.splitlines() if line}

    def grant(self, environment: str, tenant: str) -> None:
        """Let ``tenant`` use ``environment`` (it built it, or built the same inputs).
        Callers hold the environment's build lock, so no grant is lost to another."""
        tenants = self.tenants(environment)
        if tenant not in tenants:
            text = "".join(f"{t}\n" for t in sorted(tenants | {tenant}))
            write_text_atomic(self.tenants_path(environment), text)

    def revoke(self, environment: str, tenant: str) -> set[str]:
        """Take ``tenant``'s use of ``environment`` away; the tenants left. Callers hold the
        environment's build lock."""
        tenants = self.tenants(environment) - {tenant}
        write_text_atomic(
            self.tenants_path(environment), "".join(f"{t}\n" for t in sorted(tenants))
        )
        return tenants

    def granted_to(self, tenant: str) -> list[str]:
        """The environments ``tenant`` may use."""
        return sorted(
            path.stem
            for path in self.directory.glob("*.tenants")
            if tenant in path.read_text().splitlines()
        )

    def touch(self, environment: str) -> EnvironmentRecord:
        """Mark ``environment`` used now (for least-recently-used collection)."""
        record = self.get(environment)
        record.last_used_at = time.time()
        self.put(record)
        return record

    def all(self) -> list[EnvironmentRecord]:
        found = []
        for path in sorted(self.directory.glob("*.json")):
            with contextlib.suppress(NotFoundError):
                found.append(self.get(path.stem))
        return found

    def remove(self, environment: str) -> None:
        paths = (self.record_path(environment), self.log_path(environment))
        for path in (*paths, self.tenants_path(environment)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
