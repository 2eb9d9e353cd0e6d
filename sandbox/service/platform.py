"""The assembled platform: policies, images, the Docker backend, the pool and the services on top.

Used by the HTTP service and by the command line alike, so both run code the
same way. Start-up refuses a bad policy or a missing Python image instead of
falling back to anything. The other images (polyglot) may be missing: their
languages are refused with a 503 naming the image and ``sandbox images build``,
and the image is used once built, without a restart. :meth:`Platform.reload_policies`
re-reads the policy directory while the service runs: a set that fails validation is
refused whole, and sandboxes of a changed or removed policy's old version are retired.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sandbox.backends.docker import DockerBackend
from sandbox.core.execution import ExecutionService
from sandbox.core.pool import (
    DEFAULT_LEASE_TIMEOUT_S,
    DEFAULT_MAX_WAITERS,
    DEFAULT_START_CONCURRENCY,
    GroupStatus,
    Pool,
    PoolStatus,
    RefillHook,
)
from sandbox.core.sessions import SessionManager
from sandbox.core.snapshots import DEFAULT_BUDGET_BYTES, DEFAULT_TTL_S, SnapshotStore
from sandbox.environments import EnvironmentBuilder, load_environments_config
from sandbox.errors import InfrastructureError, NotFoundError, PolicyError
from sandbox.host import reaper
from sandbox.host.images import repo_root, resolve_image
from sandbox.host.labels import environment_in, public_label
from sandbox.judge.batches import Evaluator
from sandbox.judge.judge import Judge
from sandbox.languages import LANGUAGES
from sandbox.policy import (
    Policy,
    PolicyChanges,
    PolicyVersion,
    compare_versions,
    load_policy_dir,
    stamp_versions,
)
from sandbox.service.recent import RecentExecutions, Refusals
from sandbox.service.tenants import Keyring
from sandbox.telemetry import metrics
from sandbox.telemetry.audit import AuditLog, AuditRecord

logger = logging.getLogger(__name__)

DEFAULT_POLICIES_DIR = repo_root() / "policies"
STATE_DIR_ENV = "SANDBOX_STATE_DIR"
RELOAD_AUDIT_KIND = "policy_reload"


def default_state_dir() -> Path:
    """Where the service keeps state that must survive restarts (audit log, snapshots)."""
    if os.environ.get(STATE_DIR_ENV):
        return Path(os.environ[STATE_DIR_ENV])
    if os.geteuid() == 0:
        return Path("/var/lib/sandbox-platform")
    return Path.home() / ".local" / "state" / "sandbox-platform"


DEFAULT_WARM_TIMEOUT_S = 120.0


class PlatformSettings(BaseModel):
    """What the operator chooses when starting the platform."""

    model_config = ConfigDict(extra="forbid")

    policies_dir: Path = DEFAULT_POLICIES_DIR
    warm: list[str] = Field(
        default_factory=lambda: ["default"],
        description="Policies whose pools are warmed at start (others warm on first use).",
    )
    max_waiters: int = Field(default=DEFAULT_MAX_WAITERS, ge=0)
    start_concurrency: int = Field(default=DEFAULT_START_CONCURRENCY, ge=1, le=64)
    lease_timeout_s: float = Field(default=DEFAULT_LEASE_TIMEOUT_S, gt=0)
    warm_timeout_s: float = Field(default=DEFAULT_WARM_TIMEOUT_S, gt=0)
    keys_file: Path | None = Field(
        default=None, description="API keys (else $SANDBOX_API_KEYS_FILE / $SANDBOX_API_KEYS)."
    )
    audit_path: Path = Field(default_factory=lambda: default_state_dir() / "audit.db")
    audit_verify_interval_s: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Walk the audit log's hash chain this often (sandbox_audit_chain_ok); "
        "None: never.",
    )
    snapshots_dir: Path | None = Field(
        default=None, description="Where snapshots are kept (default: snapshots/ by the audit log)."
    )
    snapshot_ttl_s: float = Field(default=DEFAULT_TTL_S, gt=0, allow_inf_nan=False)
    snapshot_budget_bytes: int = Field(
        default=DEFAULT_BUDGET_BYTES, ge=0, description="All tenants' snapshots together."
    )
    environments_config: Path | None = Field(
        default=None,
        description="image_aliases and disk_budget_mb (else $SANDBOX_ENVIRONMENTS_CONFIG).",
    )
    environments_dir: Path | None = Field(
        default=None,
        description="Built environments' records and logs (default: by the audit log).",
    )
    image_base: str | None = Field(
        default=None,
        pattern="^(debootstrap|registry)$",
        description="Which build of the images to use; None takes whichever is built.",
    )


class ImageNotBuiltError(InfrastructureError):
    """An image some languages need is not built on this host (503 ``infrastructure_error``)."""


class Platform:
    """Owns the backend, the pool and the services; ``start`` then ``close``."""

    # How long a missing image is taken as missing before the engine is asked again.
    IMAGE_RECHECK_S = 10.0

    def __init__(
        self,
        settings: PlatformSettings | None = None,
        *,
        policies: Mapping[str, Policy] | None = None,
        refill: RefillHook | None = None,
    ) -> None:
        """``refill``: the pool's elastic sizing (a fleet host's); else the policies' warm."""
        self.settings = settings or PlatformSettings()
        self.policies = (
            dict(policies) if policies is not None else load_policy_dir(self.settings.policies_dir)
        )
        unknown = sorted(set(self.settings.warm) - set(self.policies))
        if unknown:
            raise NotFoundError(
                f"cannot warm unknown policies {unknown}; known: {sorted(self.policies)}"
            )
        metrics.declare_policies(self.policies)
        self.versions: dict[str, PolicyVersion] = stamp_versions(self.policies)
        self._reloading = asyncio.Lock()
        self.keyring = Keyring.from_environment(self.settings.keys_file)
        self.images: dict[str, str] = {}
        self._unbuilt: dict[str, tuple[float, str]] = {}  # name -> (checked at, why)
        self._resolve_images()
        self.backend = DockerBackend()
        self.pool = Pool(
            self.backend,
            max_waiters=self.settings.max_waiters,
            start_concurrency=self.settings.start_concurrency,
            lease_timeout_s=self.settings.lease_timeout_s,
            quotas=self.keyring.quotas,
            refill=refill,
        )
        self.audit = AuditLog(self.settings.audit_path)
        self.recent = RecentExecutions()
        self.refusals = Refusals()
        self.execution = ExecutionService(
            self.pool, self.policies, self.image, self.audit, observer=self.recent.record
        )
        self.judge = Judge(self.execution)
        self.evaluator = Evaluator(self.judge)
        snapshots = SnapshotStore(
            self.settings.snapshots_dir or self.settings.audit_path.parent / "snapshots",
            ttl_s=self.settings.snapshot_ttl_s,
            budget_bytes=self.settings.snapshot_budget_bytes,
            quotas=self.keyring.quotas,
        )
        self.environments = EnvironmentBuilder(
            self.settings.environments_dir or self.settings.audit_path.parent / "environments",
            load_environments_config(self.settings.environments_config),
            max_environments=lambda tenant: self.keyring.quotas(tenant).max_environments,
        )
        self.sessions = SessionManager(self.execution, snapshots, self.environments)
        self._audit_walks: asyncio.Task[None] | None = None

    @staticmethod
    def _image_names() -> set[str]:
        return {language.image for language in LANGUAGES.values()}

    def _resolve_images(self) -> None:
        """The Python image, or :class:`NotFoundError`; the others if they are built."""
        self.images["python"] = resolve_image("python", self.settings.image_base)
        for name in sorted(self._image_names() - {"python"}):
            if self._look_up(name) is None:
                logger.warning(
                    "%s; languages %s are refused until it is built",
                    self._unbuilt[name][1],
                    self._languages(name),
                )

    def _look_up(self, name: str) -> str | None:
        try:
            tag = resolve_image(name, self.settings.image_base)
        except NotFoundError as exc:
            self._unbuilt[name] = (time.monotonic(), str(exc))
            return None
        self.images[name] = tag
        self._unbuilt.pop(name, None)
        return tag

    @staticmethod
    def _languages(image: str) -> list[str]:
        return sorted(language.name for language in LANGUAGES.values() if language.image == image)

    def image(self, name: str) -> str:
        """The built image tag for an image name (``python`` -> ``sandbox-python:<hash>``).

        An image not built (at start, or when last asked within ``IMAGE_RECHECK_S``)
        raises :class:`ImageNotBuiltError`; one of no language, :class:`NotFoundError`.
        """
        tag = self.images.get(name)
        if tag is not None:
            return tag
        if name not in self._image_names():
            raise NotFoundError(
                f"image {name!r} is not part of this platform "
                f"(known: {sorted(self._image_names())})"
            )
        checked, why = self._unbuilt.get(name, (-math.inf, ""))
        if time.monotonic() - checked >= self.IMAGE_RECHECK_S:
            tag = self._look_up(name)
            if tag is not None:
                logger.info("image %r is built now: %s", name, tag)
                return tag
            why = self._unbuilt[name][1]
        raise ImageNotBuiltError(
            f"{why}: languages {self._languages(name)} need image {name!r}, which is not "
            "built on this server; build it with `sandbox images build` (the running "
            "service finds it without a restart)"
        )

    async def start(self, *, wait: bool = True) -> None:
        """Remove leftovers, then warm the chosen policies (waiting for them with ``wait``).

        The Python image is warmed; the polyglot image warms on first use.
        """
        await self.pool.start()
        self._reaper = reaper.spawn(self.backend.owner)
        self.environments.build_networks = self.backend.build_networks(self.image("python"))
        self.sessions.start()
        interval = self.settings.audit_verify_interval_s
        if interval is not None and self._audit_walks is None:
            self._audit_walks = asyncio.create_task(self._walk_audit_every(interval))
        for name in self.settings.warm:
            policy = self.policies[name]
            for image in [self.image("python")]:
                try:
                    await asyncio.wait_for(
                        self.pool.warm(image, policy, wait=wait), self.settings.warm_timeout_s
                    )
                except TimeoutError:
                    raise InfrastructureError(
                        f"policy {name!r} did not warm within {self.settings.warm_timeout_s:.0f} s"
                    ) from None
        logger.info(
            "platform ready: policies %s, warm %s", sorted(self.policies), self.settings.warm
        )

    async def close(self) -> None:
        """Destroy every sandbox and write the audit log out; idempotent."""
        if self._audit_walks is not None:
            self._audit_walks.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._audit_walks
        await self.evaluator.close()
        await self.sessions.close_all()
        await self.pool.close()
        self.audit.close()

    async def verify_audit(self) -> None:
        """Walk the audit log's hash chain off the loop and publish the result in the metrics.

        A chain that cannot be read counts as broken; either is logged as an error.
        """
        try:
            intact, count, broken = await asyncio.to_thread(self.audit.verify)
        except sqlite3.Error as exc:
            logger.error("could not walk the audit log %s: %s", self.audit.path, exc)
            intact, count = False, 0
        else:
            if not intact:
                logger.error(
                    "the audit log %s is BROKEN at record %s (after %d good records): it was "
                    "edited or cut outside the service; `sandbox audit verify --db %s` tells",
                    self.audit.path,
                    broken,
                    count,
                    self.audit.path,
                )
        metrics.observe_audit(intact, count, time.time())

    async def _walk_audit_every(self, interval_s: float) -> None:
        while True:
            await self.verify_audit()
            await asyncio.sleep(interval_s)

    def policy_names(self) -> Sequence[str]:
        return sorted(self.policies)

    def pool_status(self, viewer: str | None = None) -> PoolStatus:
        """The pool's groups, and each policy in force with its digest and load time. A
        group of a built environment names its id only to a ``viewer`` that built it."""
        status = self.pool.status()
        groups = [self._shown(group, viewer) for group in status.groups]
        return status.model_copy(
            update={"groups": groups, "policies": list(self.versions.values())}
        )

    def _shown(self, group: GroupStatus, viewer: str | None) -> GroupStatus:
        environment = environment_in(group.image)
        if environment is None:
            return group
        if viewer is not None and viewer in self.environments.records.tenants(environment):
            return group
        return group.model_copy(
            update={"image": public_label(group.image), "policy": public_label(group.policy)}
        )

    async def reload_policies(self, *, by: str) -> PolicyChanges:
        """Re-read the policy directory and put the new set in force; ``by`` says who asked
        (a tenant, or a signal), for the audit log.

        The whole directory is validated first: any refusal (:class:`PolicyError` naming
        the file, key and fix) leaves the set in force untouched. Otherwise the new set
        replaces the old in one step; a changed or removed policy's sandboxes are retired
        (idle ones now, leased ones when their lease ends), a changed one's pool is warmed
        again under the new version, and unchanged policies' pools are left alone.
        """
        async with self._reloading:
            directory = self.settings.policies_dir
            try:
                policies = await asyncio.to_thread(load_policy_dir, directory)
                dropped = sorted(set(self.settings.warm) - set(policies))
                if dropped:
                    raise PolicyError(
                        f"policies {dropped} are warmed at start (--warm) and would be gone; "
                        "keep their files, or restart the service without warming them",
                        source=str(directory),
                    )
            except PolicyError as exc:
                self.audit.record(
                    tenant=by, kind=RELOAD_AUDIT_KIND, verdict="refused", detail=str(exc)
                )
                logger.warning("policy reload by %s refused: %s", by, exc)
                raise
            versions = stamp_versions(policies, self.versions)
            changes = compare_versions(self.versions, versions)
            self.audit.record(
                tenant=by,
                kind=RELOAD_AUDIT_KIND,
                verdict="applied",
                detail=changes.model_dump_json(),
            )
            # One step, no await: every lookup sees either the old set or the new one.
            self.policies.clear()
            self.policies.update(policies)
            self.versions = versions
            metrics.declare_policies(self.policies)
            keep = {version.digest for version in versions.values()}
            retired = self.pool.retire_policies(changes.replaced, keep)
            changed = {change.name for change in changes.changed}
            for image, name in sorted(retired):
                if name in changed:
                    await self.pool.warm(image, policies[name])
            logger.info(
                "policies reloaded by %s: added %s, changed %s, removed %s",
                by,
                [v.name for v in changes.added],
                sorted(changed),
                [v.name for v in changes.removed],
            )
            return changes

    async def audit_query(self, **filters: Any) -> list[AuditRecord]:
        """Audit records, newest first (the filters of :meth:`AuditLog.query`), off the loop."""
        return await asyncio.to_thread(lambda: self.audit.query(**filters))

    async def metrics(self) -> bytes:
        """Prometheus text: executions by status, latency histograms, pool sizes, queue depth."""
        status = self.pool_status()
        metrics.observe_pool(
            [
                (
                    group.policy,
                    group.image,
                    {
                        "idle": group.idle,
                        "busy": group.busy,
                        "starting": group.starting,
                        "resetting": group.resetting,
                    },
                    group.create_failures_total,
                )
                for group in status.groups
            ],
            status.waiting,
            status.max_waiting,
        )
        return metrics.exposition()
