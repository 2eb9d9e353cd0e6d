"""API keys and tenants: who is calling, which policies they may use, how much at once.

Keys are never stored: a keys file holds their SHA-256 (``sandbox keys new``
prints a fresh key and the line to add). Each key names a tenant, the
policies it may use (``"*"`` for all), its quotas and a rate limit (a token
bucket every authenticated request spends). ``max_concurrency`` bounds both
the requests it has running and the sandboxes it holds (runs, judged batch
items and open sessions alike); sessions and snapshots have quotas of their
own. A tenant named by several keys gets the largest of their quotas. Without
any key configured the service serves one tenant, ``anonymous``, on loopback
only, with no quota of its own: the pool's bounds (its size and its queue,
then 429) are the only limit.

Keys file (YAML)::

    keys:
      - tenant: team-a
        key_sha256: 5f4dcc3b...   # sha256 of the key
        policies: [default, strict]
        max_concurrency: 16       # requests running, and sandboxes held
        rate_per_s: 50
        max_sessions: 16          # sessions open at once
        max_snapshots: 64         # snapshots kept ...
        max_snapshot_bytes: 268435456   # ... and their bytes together
        max_task_uploads: 256     # uploaded task directories kept ...
        max_task_upload_bytes: 1073741824   # ... and their bytes together
        max_environments: 64      # task environments built (POST /v1/environments)
        admin: false              # admins may read every tenant's audit records

or the environment: ``SANDBOX_API_KEYS_FILE=/path/keys.yaml``, or
``SANDBOX_API_KEYS="team-a=KEY,team-b=KEY"`` (hashed on load; every policy,
default quotas).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sandbox.core.quotas import UNLIMITED, TenantQuotas
from sandbox.errors import AuthenticationError, ForbiddenError, PolicyError, QuotaError

KEYS_FILE_ENV = "SANDBOX_API_KEYS_FILE"
KEYS_ENV = "SANDBOX_API_KEYS"
ANONYMOUS = "anonymous"
DEFAULT_MAX_CONCURRENCY = 64
DEFAULT_RATE_PER_S = 1000.0
DEFAULT_MAX_SESSIONS = 16
DEFAULT_MAX_SNAPSHOTS = 64
DEFAULT_MAX_SNAPSHOT_BYTES = 256 << 20
DEFAULT_MAX_TASK_UPLOADS = 256
DEFAULT_MAX_TASK_UPLOAD_BYTES = 1 << 30
DEFAULT_MAX_ENVIRONMENTS = 64
MAX_KEYS_FILE_BYTES = 1 << 20
KEY_BYTES = 32

TenantName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


def hash_key(key: str) -> str:
    """The stored form of a key."""
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    """A fresh, unguessable API key."""
    return "sbx_" + secrets.token_urlsafe(KEY_BYTES)


class TenantConfig(BaseModel):
    """One key's tenant and limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: TenantName
    key_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    policies: tuple[str, ...] = ("*",)
    max_concurrency: int | None = Field(default=DEFAULT_MAX_CONCURRENCY, ge=1, le=100_000)
    rate_per_s: float | None = Field(default=DEFAULT_RATE_PER_S, gt=0, le=1_000_000)
    max_sessions: int | None = Field(default=DEFAULT_MAX_SESSIONS, ge=0, le=100_000)
    max_snapshots: int | None = Field(default=DEFAULT_MAX_SNAPSHOTS, ge=0, le=1_000_000)
    max_snapshot_bytes: int | None = Field(default=DEFAULT_MAX_SNAPSHOT_BYTES, ge=0, le=1 << 50)
    max_task_uploads: int | None = Field(default=DEFAULT_MAX_TASK_UPLOADS, ge=0, le=1_000_000)
    max_task_upload_bytes: int | None = Field(
        default=DEFAULT_MAX_TASK_UPLOAD_BYTES, ge=0, le=1 << 50
    )
    max_environments: int | None = Field(default=DEFAULT_MAX_ENVIRONMENTS, ge=0, le=100_000)
    admin: bool = False

    def quotas(self) -> TenantQuotas:
        return TenantQuotas(
            max_concurrency=self.max_concurrency,
            max_sessions=self.max_sessions,
            max_snapshots=self.max_snapshots,
            max_snapshot_bytes=self.max_snapshot_bytes,
            max_task_uploads=self.max_task_uploads,
            max_task_upload_bytes=self.max_task_upload_bytes,
            max_environments=self.max_environments,
        )


class KeysFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keys: list[TenantConfig] = Field(min_length=1)


class Tenant:
    """A tenant's live state: requests in flight and its token bucket."""

    def __init__(self, config: TenantConfig) -> None:
        self.config = config
        self.name = config.tenant
        self._in_flight = 0
        self._tokens = max(1.0, float(config.rate_per_s or 0))
        self._stamp = time.monotonic()
        self._lock = threading.Lock()

    @property
    def in_flight(self) -> int:
        """Requests of this tenant running now."""
        return self._in_flight

    def allow_policy(self, policy: str) -> None:
        """Refuse (403) a policy this tenant's key does not list."""
        allowed = self.config.policies
        if "*" not in allowed and policy not in allowed:
            raise ForbiddenError(
                f"tenant {self.name!r} may not use policy {policy!r} (allowed: "
                f"{', '.join(allowed)}); ask an operator to add it to the key"
            )

    def admit(self) -> None:
        """Spend one request of the tenant's rate; 429 when its bucket is empty.

        The bucket holds ``max(1, rate_per_s)`` requests, so even a rate below one a
        second lets one through. ``None`` is no limit.
        """
        rate = self.config.rate_per_s
        if rate is None:
            return
        with self._lock:
            now = time.monotonic()
            burst = max(1.0, rate)
            self._tokens = min(burst, self._tokens + (now - self._stamp) * rate)
            self._stamp = now
            if self._tokens < 1:
                raise QuotaError(
                    f"tenant {self.name!r} is over its rate of {rate:g} requests/s "
                    "(rate_per_s of its key)",
                    retry_after=(1 - self._tokens) / rate,
                )
            self._tokens -= 1

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the tenant's concurrent requests; 429 when ``max_concurrency`` run.

        A quota of ``None`` is no limit. (The rate is spent by authentication.)
        """
        with self._lock:
            quota = self.config.max_concurrency
            if quota is not None and self._in_flight >= quota:
                raise QuotaError(
                    f"tenant {self.name!r} already has {self._in_flight} requests running "
                    f"(its max_concurrency is {quota})",
                    retry_after=1.0,
                )
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1


def _larger(a: TenantQuotas, b: TenantQuotas) -> TenantQuotas:
    """Field by field, the larger quota (``None``, no limit, is the largest)."""
    values = {}
    for name in (f.name for f in fields(TenantQuotas)):
        x, y = getattr(a, name), getattr(b, name)
        values[name] = None if x is None or y is None else max(x, y)
    return TenantQuotas(**values)


class Keyring:
    """The configured keys; ``open`` when there are none (one anonymous tenant, loopback)."""

    def __init__(self, configs: Sequence[TenantConfig]) -> None:
        self._by_hash = {c.key_sha256: Tenant(c) for c in configs}
        if len(self._by_hash) != len(configs):
            raise PolicyError("the same key is listed twice", source="keys")
        self.anonymous = Tenant(
            TenantConfig(
                tenant=ANONYMOUS,
                key_sha256="0" * 64,
                admin=True,
                max_concurrency=None,
                rate_per_s=None,
                max_sessions=None,
                max_snapshots=None,
                max_snapshot_bytes=None,
                max_task_uploads=None,
                max_task_upload_bytes=None,
                max_environments=None,
            )
        )
        self._quotas: dict[str, TenantQuotas] = {}
        for config in configs:
            earlier = self._quotas.get(config.tenant)
            self._quotas[config.tenant] = (
                config.quotas() if earlier is None else _larger(earlier, config.quotas())
            )

    def quotas(self, tenant: str) -> TenantQuotas:
        """What ``tenant`` may hold (no limits for a name no key carries: anonymous, library)."""
        return self._quotas.get(tenant, UNLIMITED)

    def tenants(self) -> list[Tenant]:
        """One live tenant per configured key (the anonymous one when there are none)."""
        return list(self._by_hash.values()) or [self.anonymous]

    @property
    def open(self) -> bool:
        return not self._by_hash

    def identify(self, presented: str | None) -> Tenant | None:
        """The tenant of a presented key without spending its rate; None for no known key."""
        if self.open:
            return self.anonymous
        return self._by_hash.get(hash_key(presented)) if presented else None

    def authenticate(self, presented: str | None) -> Tenant:
        """The tenant a presented key belongs to, one request of its rate spent.

        401 when the key is missing or unknown, 429 when the tenant is over its rate:
        every authenticated request counts, whatever it asks for.
        """
        if self.open:
            return self.anonymous
        if not presented:
            raise AuthenticationError(
                "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key'"
            )
        tenant = self._by_hash.get(hash_key(presented))
        if tenant is None:
            raise AuthenticationError("unknown API key")
        tenant.admit()
        return tenant

    @classmethod
    def from_file(cls, path: Path) -> Keyring:
        source = str(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise PolicyError(f"cannot read the keys file: {exc.strerror}", source=source) from None
        if len(text) > MAX_KEYS_FILE_BYTES:
            raise PolicyError(f"larger than {MAX_KEYS_FILE_BYTES} bytes", source=source)
        try:
            data = yaml.safe_load(text)
            return cls(KeysFile.model_validate(data).keys)
        except yaml.YAMLError as exc:
            raise PolicyError(f"not valid YAML: {exc}", source=source) from None
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(part) for part in first["loc"])
            raise PolicyError(first["msg"], source=source, key=key) from None

    @classmethod
    def from_environment(cls, keys_file: Path | None = None) -> Keyring:
        """``keys_file``, else ``$SANDBOX_API_KEYS_FILE``, else ``$SANDBOX_API_KEYS``, else open."""
        path = keys_file or (
            Path(os.environ[KEYS_FILE_ENV]) if os.environ.get(KEYS_FILE_ENV) else None
        )
        if path is not None:
            return cls.from_file(path)
        inline = os.environ.get(KEYS_ENV, "").strip()
        if not inline:
            return cls([])
        configs = []
        for entry in inline.split(","):
            name, sep, key = entry.strip().partition("=")
            if not sep or not key:
                raise PolicyError(
                    f"entries must be TENANT=KEY, got {entry[:20]!r}", source=KEYS_ENV
                )
            configs.append(TenantConfig(tenant=name, key_sha256=hash_key(key)))
        return cls(configs)
