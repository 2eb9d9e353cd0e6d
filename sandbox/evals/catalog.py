"""The tasks a service can open episodes of: the shipped ones by id, and tenants' uploads.

A tenant uploads a task directory (any format :func:`.formats.load_task` reads)
as a tar archive; it is unpacked safely into the service's state directory, under
a folder of that tenant's, named by the task's content digest, and loaded like
any task. The reference is ``upload:<digest>``; uploading the same content
again returns the same reference. One tenant never sees another's uploads
(they hold hidden tests). A tenant keeps at most its ``max_task_uploads`` and
``max_task_upload_bytes`` (429 naming what it keeps; ``DELETE /v1/tasks/<ref>``
frees one; an episode already open keeps its task). The uploads live on disk; only
the most recently used stay loaded, within :data:`CACHED_TASK_BYTES`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from sandbox.core.quotas import QuotaLookup, unlimited
from sandbox.environments.upload import unpack_context
from sandbox.errors import InvalidRequestError, NotFoundError, QuotaError
from sandbox.results import TaskInfo

from .formats import load_task, load_tasks
from .formats.export import SUITE
from .tasks import Task, TaskError

__all__ = ["UPLOAD_PREFIX", "TaskCatalog", "TaskInfo"]

UPLOAD_PREFIX: Final = "upload:"
MAX_TASK_BYTES: Final = 64 << 20
CACHED_TASK_BYTES: Final = 256 << 20
"""The uploaded tasks' files kept loaded at most (the least recently used are read from
disk again when next used)."""
DELETE_HINT: Final = "delete uploads you no longer need (DELETE /v1/tasks/upload:<digest>)"
RETRY_AFTER_S: Final = 60
HARBOR_SUITE: Final = SUITE.parent / "harbor_suite"
NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _info(ref: str, task: Task) -> TaskInfo:
    return TaskInfo(
        task=ref,
        id=task.id,
        digest=task.digest,
        instruction=task.config.instruction,
        category=task.config.category,
        difficulty=task.difficulty,
    )


class TaskCatalog:
    """Shipped tasks (``sandbox/evals/suite`` and ``harbor_suite``) and tenants' uploads."""

    def __init__(
        self,
        root: Path,
        *,
        shipped: tuple[Path, ...] = (SUITE, HARBOR_SUITE),
        quotas: QuotaLookup = unlimited,
    ) -> None:
        self.root = root
        self.quotas = quotas
        self._shipped_dirs = shipped
        self._shipped: dict[str, Task] | None = None
        self._uploads: OrderedDict[tuple[str, str], Task] = OrderedDict()
        self._lock = threading.Lock()
        self._adding = threading.Lock()  # one upload at a time is checked and kept

    def _shipped_tasks(self) -> dict[str, Task]:
        with self._lock:
            if self._shipped is None:
                self._shipped = {t.id: t for d in self._shipped_dirs for t in load_tasks(d)}
            return self._shipped

    @staticmethod
    def _tenant_dir(tenant: str) -> str:
        return hashlib.sha256(tenant.encode()).hexdigest()[:16]

    def add(self, archive: bytes, *, tenant: str, name: str = "task") -> TaskInfo:
        """Unpack and load an uploaded task directory (its id is ``name``, the folder's
        name on the client); refusals name what is wrong in it."""
        if not NAME.fullmatch(name):
            raise InvalidRequestError(
                f"name={name!r}: a task's name is 1-100 letters, digits, '.', '_' or '-'"
            )
        folder = self.root / self._tenant_dir(tenant)
        folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".upload-", dir=folder))
        try:
            (staging / name).mkdir()
            unpack_context(archive, staging / name, max_bytes=MAX_TASK_BYTES, what="task directory")
            try:
                digest = load_task(staging / name).digest
            except TaskError as exc:  # name the upload, not the staging folder
                raise InvalidRequestError(str(exc).replace(f"{staging}{os.sep}", "")) from None
            target = folder / digest
            with self._adding:
                if not target.exists():
                    self._check_room(tenant, folder, _size(staging))
                    staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return _info(UPLOAD_PREFIX + digest, self._load(tenant, digest, target))

    def _check_room(self, tenant: str, folder: Path, size: int) -> None:
        uploads = self._digests(folder)
        held = sum(_size(folder / digest) for digest in uploads)
        quotas = self.quotas(tenant)
        keeps = f"tenant {tenant!r} keeps {len(uploads)} uploaded tasks of {held} bytes"
        if quotas.max_task_uploads is not None and len(uploads) >= quotas.max_task_uploads:
            raise QuotaError(
                f"{keeps} and its max_task_uploads is {quotas.max_task_uploads}; {DELETE_HINT}",
                retry_after=RETRY_AFTER_S,
            )
        limit = quotas.max_task_upload_bytes
        if limit is not None and held + size > limit:
            raise QuotaError(
                f"{keeps}; this one of {size} bytes would pass its max_task_upload_bytes of "
                f"{limit}; {DELETE_HINT}",
                retry_after=RETRY_AFTER_S,
            )

    @staticmethod
    def _digests(folder: Path) -> list[str]:
        """The uploads kept in a tenant's folder (not the staging folders of uploads)."""
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name.isalnum())

    def _load(self, tenant: str, digest: str, path: Path) -> Task:
        """The task kept at ``path``, from the cache (loaded and cached on a miss)."""
        key = (tenant, digest)
        with self._lock:
            task = self._uploads.get(key)
            if task is not None:
                self._uploads.move_to_end(key)
                return task
        found = sorted(p for p in path.iterdir() if p.is_dir())
        if not found:
            raise NotFoundError(
                f"uploaded task {UPLOAD_PREFIX}{digest} is incomplete; upload it again"
            )
        task = load_task(found[0])
        with self._lock:
            self._uploads[key] = task
            while len(self._uploads) > 1 and _loaded(self._uploads) > CACHED_TASK_BYTES:
                self._uploads.popitem(last=False)
        return task

    def _upload_path(self, ref: str, tenant: str) -> tuple[str, Path]:
        digest = ref[len(UPLOAD_PREFIX) :]
        path = self.root / self._tenant_dir(tenant) / digest
        if not (digest.isalnum() and path.is_dir()):
            raise NotFoundError(
                f"no uploaded task {ref!r} for this tenant; upload it (POST /v1/tasks)"
            )
        return digest, path

    def remove(self, ref: str, *, tenant: str) -> None:
        """Delete ``tenant``'s upload ``ref`` (``upload:<digest>``); not found for another's."""
        if not ref.startswith(UPLOAD_PREFIX):
            raise InvalidRequestError(
                f"{ref!r} is not an upload (upload:<digest>); shipped tasks cannot be deleted"
            )
        digest, path = self._upload_path(ref, tenant)
        with self._adding:
            shutil.rmtree(path, ignore_errors=True)
        with self._lock:
            self._uploads.pop((tenant, digest), None)

    def get(self, ref: str, *, tenant: str) -> Task:
        """The task ``ref`` names: a shipped task's id, or ``upload:<digest>`` of this tenant."""
        if ref.startswith(UPLOAD_PREFIX):
            digest, path = self._upload_path(ref, tenant)
            return self._load(tenant, digest, path)
        task = self._shipped_tasks().get(ref)
        if task is None:
            raise NotFoundError(
                f"no task {ref!r}: give a shipped task's id (GET /v1/tasks) or upload:<digest> "
                "of a task you uploaded (POST /v1/tasks)"
            )
        return task

    def list(self, *, tenant: str) -> list[TaskInfo]:
        """The shipped tasks, then this tenant's uploads."""
        infos = [_info(ref, t) for ref, t in sorted(self._shipped_tasks().items())]
        folder = self.root / self._tenant_dir(tenant)
        for digest in self._digests(folder):
            with contextlib.suppress(NotFoundError, TaskError):
                infos.append(
                    _info(UPLOAD_PREFIX + digest, self._load(tenant, digest, folder / digest))
                )
        return infos


def _loaded(tasks: Mapping[tuple[str, str], Task]) -> int:
    return sum(len(data) for task in tasks.values() for data in task.files.values())


def _size(path: Path) -> int:
    """The bytes of the files under ``path`` (links not followed)."""
    total = 0
    for parent, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(parent, name)).st_size
    return total
