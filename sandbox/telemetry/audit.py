"""The audit log: every execution, judgement and session command, append-only, across restarts.

Records live in SQLite (WAL). The table refuses UPDATE and DELETE (triggers),
and each record carries the SHA-256 of the previous one's hash and its own
content, so :meth:`AuditLog.verify` notices a record edited or removed by
someone who went around the triggers. Each record is committed before
:meth:`AuditLog.record` returns, so what the service has told a client is in
the log even if the service is killed right after (``kill -9``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sandbox.errors import InfrastructureError

logger = logging.getLogger(__name__)

MAX_QUERY_LIMIT = 10_000
GENESIS = "0" * 64
_FIELDS = (
    "time", "tenant", "kind", "policy", "image", "language", "code_sha256", "verdict",
    "wall_s", "cpu_s", "peak_memory_bytes", "duration_s", "detail",
)  # fmt: skip
_NUMERIC = frozenset({"wall_s", "cpu_s", "peak_memory_bytes", "duration_s"})
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    {", ".join(f"{name} {'REAL' if name in _NUMERIC else 'TEXT'}" for name in _FIELDS)},
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_tenant_time ON audit (tenant, time);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""


class AuditRecord(BaseModel):
    """One audited action."""

    id: int | None = None
    time: str
    tenant: str
    kind: str
    policy: str | None = None
    image: str | None = None
    language: str | None = None
    code_sha256: str | None = None
    verdict: str | None = None
    wall_s: float | None = None
    cpu_s: float | None = None
    peak_memory_bytes: float | None = None
    duration_s: float | None = None
    detail: str | None = None
    prev_hash: str | None = None
    hash: str | None = None


def code_hash(code: str | bytes) -> str:
    return hashlib.sha256(code.encode() if isinstance(code, str) else code).hexdigest()


def _canonical(name: str, value: Any) -> Any:
    """A field as stored, the same whether it comes from a caller or from the database."""
    if value is None:
        return None
    return float(value) if name in _NUMERIC else str(value)


def _chain(prev_hash: str, fields: dict[str, Any]) -> str:
    values = [_canonical(name, fields.get(name)) for name in _FIELDS]
    body = json.dumps(values, separators=(",", ":"))
    return hashlib.sha256((prev_hash + body).encode()).hexdigest()


class AuditLog:
    """Append-only audit records in a SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # A commit is in the WAL file (the kernel's page cache) when it returns: it outlives
        # the process (kill -9), not a power cut, and costs no fsync per record.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._db.execute("PRAGMA busy_timeout=10000")
        self._lock = threading.Lock()

    def record(self, *, tenant: str, kind: str, **fields: Any) -> None:
        """Append one record and commit it: once this returns, the record survives a crash
        of the service, so a caller may then tell its client what was done.

        Raises :class:`~sandbox.errors.InfrastructureError` when the record cannot be
        written: what is not in the log must not be reported as done.
        """
        unknown = set(fields) - set(_FIELDS)
        if unknown:
            raise ValueError(f"unknown audit fields {sorted(unknown)}")
        stamp = datetime.now(UTC).isoformat(timespec="microseconds")
        try:
            self._insert({"time": stamp, "tenant": tenant, "kind": kind, **fields})
        except sqlite3.Error as exc:
            logger.error("could not write an audit record to %s: %s", self.path, exc)
            raise InfrastructureError(
                f"the audit log could not record this {kind} ({exc}); the result is withheld, "
                "retry the request"
            ) from exc

    def _insert(self, record: dict[str, Any]) -> None:
        with self._lock:
            # IMMEDIATE takes the write lock first: the chain's last link is read and
            # extended atomically, even when several services share the file.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute("SELECT hash FROM audit ORDER BY id DESC LIMIT 1").fetchone()
                last = row[0] if row else GENESIS
                values = [_canonical(name, record.get(name)) for name in _FIELDS]
                placeholders = ", ".join("?" * (len(_FIELDS) + 2))
                self._db.execute(
                    f"INSERT INTO audit ({', '.join(_FIELDS)}, prev_hash, hash) "
                    f"VALUES ({placeholders})",
                    [*values, last, _chain(last, record)],
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def query(
        self,
        *,
        tenant: str | None = None,
        kind: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Records, newest first, filtered by tenant, kind and ISO time range."""
        clauses, params = [], []
        for column, value, op in (
            ("tenant", tenant, "="),
            ("kind", kind, "="),
            ("time", since, ">="),
            ("time", until, "<"),
        ):
            if value is not None:
                clauses.append(f"{column} {op} ?")
                params.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        limit = max(1, min(limit, MAX_QUERY_LIMIT))
        with self._lock:
            cursor = self._db.execute(
                f"SELECT id, {', '.join(_FIELDS)}, prev_hash, hash FROM audit {where} "
                f"ORDER BY id DESC LIMIT {limit}",
                params,
            )
            names = [column[0] for column in cursor.description]
            return [AuditRecord(**dict(zip(names, row, strict=True))) for row in cursor]

    def verify(self) -> tuple[bool, int, int | None]:
        """Walk the hash chain: (intact, records checked, id of the first broken record)."""
        previous = GENESIS
        count = 0
        with self._lock:
            rows = self._db.execute(
                f"SELECT id, {', '.join(_FIELDS)}, prev_hash, hash FROM audit ORDER BY id"
            ).fetchall()
        for row in rows:
            record = dict(zip(("id", *_FIELDS, "prev_hash", "hash"), row, strict=True))
            if record["prev_hash"] != previous or _chain(previous, record) != record["hash"]:
                return False, count, record["id"]
            previous = record["hash"]
            count += 1
        return True, count, None

    def close(self) -> None:
        """Close the file; idempotent."""
        with self._lock:
            self._db.close()
