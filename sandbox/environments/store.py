"""Built environments: their records on disk (image, times, notes, build log).

Each environment is ``<id>.json`` (its :class:`EnvironmentRecord`) and
``<id>.log`` (the whole build output) in the store's directory. The id is the
content hash of the build's inputs, so a record is found again by building the
same inputs; ``last_used_at`` orders garbage collection.
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

logger = logging.getLogger(__name__)

ENV_REPOSITORY = "sandbox-env"
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

    def get(self, environment: str) -> EnvironmentRecord:
        """The record of ``environment``; :class:`NotFoundError` if never built here."""
        path = self.record_path(environment)
        try:
            return EnvironmentRecord.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            raise NotFoundError(
                f"no environment {environment!r}; build one with POST /v1/environments"
            ) from None
        except (OSError, ValidationError) as exc:
            raise NotFoundError(f"environment {environment!r} has a broken record: {exc}") from None

    def put(self, record: EnvironmentRecord) -> None:
        """Write ``record`` whole (concurrent builds of one environment may both write it)."""
        path = self.record_path(record.environment)
        write_text_atomic(path, record.model_dump_json(indent=1))

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
        for path in (self.record_path(environment), self.log_path(environment)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
