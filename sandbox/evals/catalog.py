"""The tasks a service can open episodes of: the shipped ones by id, and tenants' uploads.

A tenant uploads a task directory (any format :func:`.formats.load_task` reads)
as a tar archive; it is unpacked safely into the service's state directory, under
a folder of that tenant's, named by the task's content digest, and loaded like
any task. The reference is ``upload:<digest>``; uploading the same content
again returns the same reference. One tenant never sees another's uploads
(they hold hidden tests).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Final

from sandbox.environments.upload import unpack_context
from sandbox.errors import InvalidRequestError, NotFoundError
from sandbox.results import TaskInfo

from .formats import load_task, load_tasks
from .formats.export import SUITE
from .tasks import Task, TaskError

__all__ = ["UPLOAD_PREFIX", "TaskCatalog", "TaskInfo"]

UPLOAD_PREFIX: Final = "upload:"
MAX_TASK_BYTES: Final = 64 << 20
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

    def __init__(self, root: Path, *, shipped: tuple[Path, ...] = (SUITE, HARBOR_SUITE)) -> None:
        self.root = root
        self._shipped_dirs = shipped
        self._shipped: dict[str, Task] | None = None
        self._uploads: dict[tuple[str, str], Task] = {}
        self._lock = threading.Lock()

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
            if not target.exists():
                staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        (loaded,) = [load_task(path) for path in target.iterdir() if path.is_dir()][:1]
        with self._lock:
            self._uploads[(tenant, digest)] = loaded
        return _info(UPLOAD_PREFIX + digest, loaded)

    def get(self, ref: str, *, tenant: str) -> Task:
        """The task ``ref`` names: a shipped task's id, or ``upload:<digest>`` of this tenant."""
        if ref.startswith(UPLOAD_PREFIX):
            digest = ref[len(UPLOAD_PREFIX) :]
            with self._lock:
                task = self._uploads.get((tenant, digest))
            if task is None:
                path = self.root / self._tenant_dir(tenant) / digest
                found = sorted(path.iterdir()) if digest.isalnum() and path.is_dir() else []
                if not found:
                    raise NotFoundError(
                        f"no uploaded task {ref!r} for this tenant; upload it (POST /v1/tasks)"
                    )
                task = load_task(found[0])
                with self._lock:
                    self._uploads[(tenant, digest)] = task
            return task
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
        with self._lock:
            mine = sorted(
                ((d, t) for (owner, d), t in self._uploads.items() if owner == tenant),
                key=lambda pair: pair[0],
            )
        return infos + [_info(UPLOAD_PREFIX + d, t) for d, t in mine]
