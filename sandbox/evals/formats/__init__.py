"""Task formats besides our own ``task.yaml``: Harbor and legacy Terminal-Bench, and the exporter.

:func:`load_task` reads a task directory in whichever format it is written:

- ``task.toml``: a Harbor task (:mod:`.harbor`);
- ``task.yaml`` with ``run-tests.sh`` or a ``Dockerfile`` beside it: a legacy
  Terminal-Bench task (:mod:`.terminal_bench`);
- ``task.yaml`` otherwise: ours (:func:`sandbox.evals.tasks.load_task`).

Both outside formats become a :class:`~sandbox.evals.tasks.Task` with its
``environment`` set and ``judged_by_reward`` (:mod:`.layout`,
:mod:`sandbox.evals.reward_files`). :mod:`.export` writes our tasks in Harbor's format.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from .. import tasks as own
from ..tasks import Task
from .harbor import CONFIG_FILE, load_harbor_task
from .terminal_bench import is_terminal_bench, load_terminal_bench_task

__all__ = ["MARKERS", "load_task", "load_tasks", "task_format"]

MARKERS: Final = (own.TASK_FILE, CONFIG_FILE)


def task_format(path: Path | str) -> str:
    """``harbor``, ``terminal-bench`` or ``sandbox``: the format of a task directory."""
    directory = Path(path)
    if os.path.lexists(directory / CONFIG_FILE):
        return "harbor"
    if is_terminal_bench(directory):
        return "terminal-bench"
    return "sandbox"


def load_task(path: Path | str) -> Task:
    """Load one task directory in any supported format; raises :class:`~.tasks.TaskError`."""
    kind = task_format(path)
    if kind == "harbor":
        if not Path(path).is_dir():
            return own.load_task(path)  # its refusal names what the path is
        return load_harbor_task(path)
    if kind == "terminal-bench":
        return load_terminal_bench_task(path)
    return own.load_task(path)


def load_tasks(path: Path | str) -> list[Task]:
    """A task directory or a directory of them, in any supported formats (sorted by id)."""
    return own.load_tasks(path, loader=load_task, markers=MARKERS)
