"""Session snapshots kept on disk, per tenant, for a while, within a size budget.

A snapshot is two files in the store's directory (the service's state directory,
``snapshots/``): ``<id>.tar``, the workspace archive as the sandbox made it, and
``<id>.json``, its record (tenant, policy, image, size, times). Each is written
under a temporary name and renamed, the record last, so a snapshot exists once
both are whole. The store survives restarts: it reads the records at start.

Every snapshot expires ``ttl_s`` after it was taken (checked on every use and
swept by the session reaper); ``delete`` frees one sooner. A tenant keeps at
most its ``max_snapshots`` and ``max_snapshot_bytes`` (a refusal names what it
keeps); all tenants together at most ``budget_bytes``.

Ids are unguessable, scoped to their tenant (another tenant's id is not found),
and checked against their format before a path is made of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sandbox.core.quotas import QuotaLookup, unlimited
from sandbox.environments import ResourceRequest
from sandbox.errors import CapacityError, InfrastructureError, NotFoundError, QuotaError

logger = logging.getLogger(__name__)

DEFAULT_TTL_S = 24 * 3600.0
DEFAULT_BUDGET_BYTES = 1 << 30
RETRY_AFTER_S = 60.0
# A temporary file or a lone archive this old is a crash's leftover, not a write under way.
LEFTOVER_AGE_S = 3600.0
_ID = re.compile(r"^[A-Za-z0-9_-]{24}$")
_ID_BYTES = 18
DELETE_HINT = "delete one with DELETE /v1/sessions/snapshots/{id}"


class SnapshotInfo(BaseModel):
    """A snapshot, as its tenant sees it."""

    id: str
    policy: str
    image: str
    size_bytes: int
    created_at: float
    expires_at: float
    environment: str | None = None
    resources: ResourceRequest | None = None
    root: bool = False
    env: dict[str, str] = Field(default_factory=dict)


class SnapshotRecord(SnapshotInfo):
    """A snapshot's stored record: its info and its tenant."""

    model_config = ConfigDict(extra="forbid")

    tenant: str

    def info(self) -> SnapshotInfo:
        return SnapshotInfo.model_validate(self.model_dump(exclude={"tenant"}))


class SnapshotStore:
    """Snapshots in ``directory``; see the module docstring for the rules."""

    def __init__(
        self,
        directory: Path,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        quotas: QuotaLookup = unlimited,
    ) -> None:
        self.directory = directory
        self.ttl_s = ttl_s
        self.budget_bytes = budget_bytes
        self.quotas = quotas
        self._records: dict[str, SnapshotRecord] = {}
        self._load()

    def _load(self) -> None:
        """Read the records left by earlier runs; remove crash leftovers and what expired."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        now = time.time()
        for path in sorted(self.directory.iterdir()):
            if path.suffix == ".json" and _ID.match(path.stem):
                try:
                    record = SnapshotRecord.model_validate_json(path.read_bytes())
                    whole = self._archive(record.id).stat().st_size == record.size_bytes
                except (OSError, ValidationError) as exc:
                    logger.warning("dropping snapshot record %s: %s", path.name, exc)
                    whole, record = False, None
                if record is not None and whole and record.id == path.stem:
                    self._records[record.id] = record
                else:
                    self._remove(path.stem)
        for path in self.directory.iterdir():
            orphan = path.suffix == ".tar" and path.stem not in self._records
            with contextlib.suppress(OSError):
                if (orphan or path.suffix == ".part") and (
                    now - path.stat().st_mtime > LEFTOVER_AGE_S
                ):
                    path.unlink()
        self.expire()

    def _archive(self, snapshot_id: str) -> Path:
        return self.directory / f"{snapshot_id}.tar"

    def _record_path(self, snapshot_id: str) -> Path:
        return self.directory / f"{snapshot_id}.json"

    def _remove(self, snapshot_id: str) -> None:
        for path in (self._record_path(snapshot_id), self._archive(snapshot_id)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def usage(self, tenant: str) -> tuple[int, int]:
        """How many snapshots ``tenant`` keeps, and their bytes together."""
        mine = [r.size_bytes for r in self._records.values() if r.tenant == tenant]
        return len(mine), sum(mine)

    def _check_room(self, tenant: str, size: int) -> None:
        count, held = self.usage(tenant)
        quotas = self.quotas(tenant)
        keeps = f"tenant {tenant!r} keeps {count} snapshots of {held} bytes"
        if quotas.max_snapshots is not None and count >= quotas.max_snapshots:
            raise QuotaError(
                f"{keeps} and its max_snapshots is {quotas.max_snapshots}; {DELETE_HINT}",
                retry_after=RETRY_AFTER_S,
            )
        limit = quotas.max_snapshot_bytes
        if limit is not None and held + size > limit:
            raise QuotaError(
                f"{keeps}; this one of {size} bytes would pass its max_snapshot_bytes of "
                f"{limit}; {DELETE_HINT}",
                retry_after=RETRY_AFTER_S,
            )
        total = sum(r.size_bytes for r in self._records.values())
        if total + size > self.budget_bytes:
            raise CapacityError(
                f"the service's snapshot store is full ({total} of its {self.budget_bytes} "
                f"bytes; {keeps}); this one of {size} bytes does not fit; retry later",
                retry_after=RETRY_AFTER_S,
            )

    async def add(
        self,
        archive: bytes,
        *,
        tenant: str,
        policy: str,
        image: str,
        environment: str | None = None,
        resources: ResourceRequest | None = None,
        root: bool = False,
        env: dict[str, str] | None = None,
    ) -> str:
        """Keep ``archive``; its id. 429 past the tenant's quotas or the store's budget.

        A session in a built environment records it (and its request), so that a
        session started from the snapshot runs in the same environment.
        """
        self.expire()
        self._check_room(tenant, len(archive))
        now = time.time()
        record = SnapshotRecord(
            id=secrets.token_urlsafe(_ID_BYTES),
            tenant=tenant,
            policy=policy,
            image=image,
            environment=environment,
            resources=resources,
            root=root,
            env=env or {},
            size_bytes=len(archive),
            created_at=now,
            expires_at=now + self.ttl_s,
        )
        self._records[record.id] = record  # counted from now on, while it is written
        try:
            await asyncio.to_thread(self._write, record, archive)
        except OSError as exc:
            del self._records[record.id]
            self._remove(record.id)
            raise InfrastructureError(f"could not store the snapshot: {exc}") from None
        return record.id

    def _write(self, record: SnapshotRecord, archive: bytes) -> None:
        for path, data in (
            (self._archive(record.id), archive),
            (self._record_path(record.id), record.model_dump_json().encode()),
        ):
            part = path.with_name(path.name + ".part")
            with part.open("wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            part.rename(path)

    def get(self, snapshot_id: str, *, tenant: str) -> SnapshotRecord:
        """The record of one of ``tenant``'s snapshots (404 if unknown, another's or expired)."""
        record = self._records.get(snapshot_id) if _ID.match(snapshot_id) else None
        if record is not None and record.expires_at <= time.time():
            self.expire()
            record = None
        if record is None or record.tenant != tenant:
            raise NotFoundError(f"no snapshot {snapshot_id!r} (it may have expired)")
        return record

    async def read(self, record: SnapshotRecord) -> bytes:
        """The archive of a record :meth:`get` gave."""
        try:
            return await asyncio.to_thread(self._archive(record.id).read_bytes)
        except OSError as exc:
            raise InfrastructureError(f"could not read snapshot {record.id!r}: {exc}") from None

    def snapshots_of(self, tenant: str) -> list[SnapshotInfo]:
        """``tenant``'s snapshots, oldest first."""
        self.expire()
        mine = [r for r in self._records.values() if r.tenant == tenant]
        return [r.info() for r in sorted(mine, key=lambda r: r.created_at)]

    def delete(self, snapshot_id: str, *, tenant: str) -> None:
        """Forget one of ``tenant``'s snapshots and free its room (404 if there is none)."""
        self.get(snapshot_id, tenant=tenant)
        del self._records[snapshot_id]
        self._remove(snapshot_id)

    def expire(self) -> None:
        """Remove every snapshot past its time to live."""
        now = time.time()
        for record in [r for r in self._records.values() if r.expires_at <= now]:
            logger.info("snapshot %s of %s expired", record.id, record.tenant)
            del self._records[record.id]
            self._remove(record.id)
