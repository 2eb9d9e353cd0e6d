"""Writing our tasks in Harbor's format (``sandbox tasks export DIR --format harbor``).

Each task becomes ``DIR/<id>/``, which ``harbor lint`` accepts and
:func:`sandbox.evals.formats.load_task` reads back to the same verdicts:

- ``task.toml``: schema 1.4, ``[task] name = "sandbox/<id>"``; ``[metadata]``
  category, difficulty, tags; ``[agent] timeout_sec``; ``[verifier] timeout_sec``
  with ``environment_mode = "separate"`` and ``artifacts = ["/app"]`` (the
  verifier gets the agent's working directory, as our judge gets its copy);
  ``[environment] workdir = "/app"``, ``network_mode = "no-network"``.
- ``environment/Dockerfile``: ``FROM sandbox-python`` (or ``sandbox-polyglot``),
  ``WORKDIR /app`` and ``COPY app/ /app/`` with ``files/`` in ``environment/app/``
  (executable bits kept).
- ``instruction.md``: the instruction, ``/workspace`` written ``/app``.
- ``solution/solve.sh``: writes the solution's files into ``/app`` (base64, modes
  kept), then runs our ``solve.sh`` there.
- ``tests/``: our hidden tests, ``tests/Dockerfile`` (the same image, the tests
  copied to ``/tests``) and ``tests/test.sh``, which exports ``WORK`` and
  ``WORKSPACE`` as ``/app``, runs pytest on ``/tests`` (``framework: pytest``) or
  the ``command`` from ``/tests``, and writes 1 or 0 to ``/logs/verifier/reward.txt``.

Not exported, refused by name: a ``setup`` command, a policy other than
``default`` (Harbor has no policies), tests named ``test.sh`` or ``Dockerfile``.
The agent's step budget (``agent.max_steps``) has no Harbor field and is left out.
A pytest task's verdict in Harbor is pytest's exit status: Harbor has no channel
that agent code cannot forge.
"""

from __future__ import annotations

import base64
import os
import shlex
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from sandbox.core.argv import path_arg, shell_command

from ..tasks import Task, TaskError
from .layout import EXIT_STATUS_REWARD, TEST_SCRIPT, translate_paths

__all__ = ["SUITE", "export_harbor", "export_task"]

SUITE: Final = Path(__file__).resolve().parent.parent / "suite"
"""The shipped suite of tasks."""
APP: Final = "/app"
_IMAGES: Final = {"python": "sandbox-python", "polyglot": "sandbox-polyglot"}


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _task_toml(task: Task) -> str:
    config = task.config
    tags = ", ".join(_toml_string(tag) for tag in config.tags)
    lines = [
        'schema_version = "1.4"',
        f'artifacts = ["{APP}"]',
        "",
        "[task]",
        f"name = {_toml_string('sandbox/' + task.id)}",
        "",
        "[metadata]",
        f"category = {_toml_string(config.category)}",
        f"difficulty = {_toml_string(config.difficulty or 'unknown')}",
        f"tags = [{tags}]",
        "",
        "[verifier]",
        f"timeout_sec = {float(config.tests.timeout_s)}",
        'environment_mode = "separate"',
        "",
        "[agent]",
        f"timeout_sec = {float(config.agent.timeout_s)}",
        "",
        "[environment]",
        f'workdir = "{APP}"',
        'network_mode = "no-network"',
        "",
    ]
    return "\n".join(lines)


def _write(path: Path, data: bytes, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    mode = stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH
    if executable:
        mode |= stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
    os.chmod(path, mode)


def _solve_script(task: Task) -> bytes:
    lines = ["#!/bin/bash", "set -e", f"cd {APP}"]
    for path, data in sorted(task.solution_files.items()):
        encoded = base64.b64encode(data).decode("ascii")
        if "/" in path:
            lines.append(shell_command("mkdir", "-p", paths=[path.rsplit("/", 1)[0]]))
        lines.append(f"base64 -d > {shlex.quote(path_arg(path))} <<'SANDBOX_EOF'")
        lines.extend(encoded[i : i + 76] for i in range(0, len(encoded), 76))
        lines.append("SANDBOX_EOF")
        if path in task.solution_executable:
            lines.append(shell_command("chmod", "+x", paths=[path]))
    script = task.solve_script
    if script is not None:
        body = translate_paths(script, {"/workspace": APP}).decode("utf-8", errors="replace")
        lines.append("cat > /tmp/sandbox-solve.sh <<'SANDBOX_SOLVE'")
        lines.append(body.rstrip("\n"))
        lines.append("SANDBOX_SOLVE")
        lines.append("bash /tmp/sandbox-solve.sh")
    return ("\n".join(lines) + "\n").encode()


def _test_script(task: Task) -> bytes:
    spec = task.config.tests
    run = (
        "python3 -m pytest -q -p no:cacheprovider /tests"
        if spec.pytest
        else f"bash -c {shlex.quote(spec.command or '')}"
    )
    return (
        f"#!/bin/bash\nexport WORK={APP} WORKSPACE={APP}\ncd /tests\n{run}\n{EXIT_STATUS_REWARD}"
    ).encode()


def export_task(task: Task, target: Path) -> Path:
    """Write ``task`` as a Harbor task in ``target/<id>``; :class:`TaskError` when it cannot."""
    config = task.config
    source = str(task.path)
    if task.format != "sandbox":
        raise TaskError(f"is a {task.format} task already; copy it as it is", source=source)
    if config.setup is not None:
        raise TaskError(
            "a setup command has no Harbor field; do it in files/ instead",
            source=source,
            key="setup",
        )
    if config.policy != "default":
        raise TaskError(
            "Harbor tasks have no policies; only tasks on the default policy export",
            source=source,
            key="policy",
        )
    clash = sorted({TEST_SCRIPT, "Dockerfile"} & set(task.tests))
    if clash:
        raise TaskError(
            f"tests/{clash[0]} would be overwritten by Harbor's own; rename it", source=source
        )
    directory = target / task.id
    if directory.exists():
        raise TaskError("exists already; export into an empty directory", source=str(directory))
    image = _IMAGES[config.image]
    copy = f"COPY app/ {APP}/\n" if task.files else ""
    _write(directory / "task.toml", _task_toml(task).encode())
    instruction = translate_paths(config.instruction.encode(), {"/workspace": APP})
    _write(directory / "instruction.md", instruction.rstrip(b"\n") + b"\n")
    _write(
        directory / "environment" / "Dockerfile",
        f"FROM {image}\n\nWORKDIR {APP}\n{copy}".encode(),
    )
    (directory / "environment").mkdir(parents=True, exist_ok=True)
    for path, data in task.files.items():
        _write(directory / "environment" / "app" / path, data, executable=path in task.executable)
    _write(directory / "solution" / "solve.sh", _solve_script(task), executable=True)
    tests_map = {"/judge/work": APP, "/judge/tests": "/tests"}
    for path, data in task.tests.items():
        _write(directory / "tests" / path, translate_paths(data, tests_map))
    _write(
        directory / "tests" / "Dockerfile",
        f"FROM {image}\n\nWORKDIR {APP}\nCOPY . /tests/\n".encode(),
    )
    _write(directory / "tests" / TEST_SCRIPT, _test_script(task), executable=True)
    return directory


def export_harbor(tasks: Iterable[Task], target: Path) -> list[Path]:
    """Write every task in Harbor's format below ``target`` (made if missing); their directories."""
    target.mkdir(parents=True, exist_ok=True)
    return [export_task(task, target) for task in tasks]
