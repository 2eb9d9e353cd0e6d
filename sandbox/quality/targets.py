"""What to check: the paths given on the command line, as tasks and problems.

A path is one of:

- a task directory (it holds ``task.yaml``, or Harbor's ``task.toml``: any format
  :mod:`sandbox.evals.formats` reads), or that file itself;
- a directory of task directories (like ``sandbox eval run`` takes); entries
  starting with ``.`` or ``_`` and plain files are skipped;
- a JSONL problem set (``*.jsonl``; shapes in :mod:`sandbox.quality.problems`);
- a directory of problem sets (every ``*.jsonl`` directly inside it).

A directory may hold both task directories and problem sets. A task that does
not load (its ``task.yaml`` is invalid, a file is a link, ``tests/`` is
missing ...) and a problem line that fits no shape are not errors of the
command: they are *broken items*, reported with the loader's message. A path
that does not exist, or holds nothing to check, is an error of the command.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.evals.formats import MARKERS, load_task
from sandbox.evals.tasks import TASK_FILE, Task, TaskError

from .model import ItemResult, QualityInputError, Severity
from .problems import Problem, ProblemError, read_problem_set

__all__ = ["Targets", "TaskTarget", "load_targets"]


@dataclass
class TaskTarget:
    key: str
    """Unique in the report: the task's id, or ``<parent>/<id>`` when two sets share an id."""
    task: Task


@dataclass
class Targets:
    tasks: list[TaskTarget] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    broken: list[ItemResult] = field(default_factory=list)
    """Items that did not load: each has its schema finding."""

    @property
    def count(self) -> int:
        return len(self.tasks) + len(self.problems) + len(self.broken)


def _broken_task(path: Path, error: TaskError) -> ItemResult:
    item = ItemResult(key=path.name, kind="task", source=str(path), loaded=False)
    item.add("schema", Severity.BROKEN, f"the task does not load: {error}")
    return item


def _add_task_dir(targets: Targets, path: Path) -> None:
    try:
        task = load_task(path)
    except TaskError as exc:
        targets.broken.append(_broken_task(path, exc))
        return
    targets.tasks.append(TaskTarget(task.id, task))


def _add_problem_set(targets: Targets, path: Path) -> None:
    found = 0
    for number, entry in read_problem_set(path):
        found += 1
        if isinstance(entry, Problem):
            targets.problems.append(entry)
            continue
        assert isinstance(entry, ProblemError)
        name = entry.problem_id or f"line-{number}"
        item = ItemResult(
            key=f"{path.stem}/{name}", kind="problem", source=f"{path}:{number}", loaded=False
        )
        item.add("schema", Severity.BROKEN, f"line {number}: {entry}")
        targets.broken.append(item)
    if not found:
        raise QualityInputError(f"{path}: holds no problem (one JSON object a line)")


def _add_directory(targets: Targets, root: Path) -> None:
    before = targets.count
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name.startswith((".", "_")):
            continue
        path = Path(entry.path)
        if entry.is_symlink():
            raise QualityInputError(f"{path}: is a symbolic link; give the real path")
        if entry.is_file() and entry.name.endswith(".jsonl"):
            _add_problem_set(targets, path)
        elif entry.is_dir():
            if any(os.path.lexists(path / marker) for marker in MARKERS):
                _add_task_dir(targets, path)
            else:
                item = ItemResult(key=entry.name, kind="task", source=str(path), loaded=False)
                item.add(
                    "schema",
                    Severity.BROKEN,
                    f"holds no {TASK_FILE}: every directory in a task set must be a task "
                    "(start its name with '_' or '.' to have it skipped)",
                )
                targets.broken.append(item)
    if targets.count == before:
        raise QualityInputError(
            f"{root}: holds no task directory (with a {TASK_FILE}) and no .jsonl problem set"
        )


def load_targets(paths: list[Path]) -> Targets:
    """Every task and problem below ``paths``; raises :class:`QualityInputError` for bad paths."""
    if not paths:
        raise QualityInputError("give at least one task directory, task set or problem set")
    targets = Targets()
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise QualityInputError(
                f"{path}: no such file or directory; give a task directory, a directory of "
                "tasks, a .jsonl problem set or a directory of them"
            )
        if path.is_file():
            if path.name in MARKERS:
                _add_task_dir(targets, path.parent)
            elif path.suffix == ".jsonl":
                _add_problem_set(targets, path)
            else:
                raise QualityInputError(
                    f"{path}: not a task.yaml or a .jsonl problem set; give a task directory, "
                    "a directory of tasks, a .jsonl problem set or a directory of them"
                )
        elif any(os.path.lexists(path / marker) for marker in MARKERS):
            _add_task_dir(targets, path)
        else:
            _add_directory(targets, path)
    # Keys are unique in a report: a task id seen twice gets its parent's name in front.
    ids = Counter(target.task.id for target in targets.tasks)
    for target in targets.tasks:
        if ids[target.key] > 1:
            target.key = f"{target.task.path.resolve().parent.name}/{target.task.id}"
    problem_keys = Counter(p.key for p in targets.problems)
    repeated = sorted(k for k, n in problem_keys.items() if n > 1)
    if repeated:
        raise QualityInputError(
            f"problem ids repeat within a set: {', '.join(repeated[:10])}; every problem of a "
            "file needs its own id"
        )
    if len({target.key for target in targets.tasks}) != len(targets.tasks):
        raise QualityInputError("the same task directory is given twice; give each once")
    return targets
