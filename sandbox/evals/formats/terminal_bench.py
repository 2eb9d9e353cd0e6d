"""Legacy Terminal-Bench tasks, mapped the way Harbor's ``mappers/terminal_bench.py`` maps them.

A task directory::

    task.yaml            instruction and metadata (keys: :class:`TerminalBenchConfig`)
    Dockerfile           the environment (its build context: the task directory)
    docker-compose.yaml  one service that builds it (several services are refused)
    solution.sh          the reference solution
    run-tests.sh         runs the tests; its exit status is the verdict
    tests/               what run-tests.sh needs (hidden from the agent)

As Harbor's mapper does: ``run-tests.sh`` becomes ``tests/test.sh`` with
``$TEST_DIR`` replaced by ``/tests`` and a suffix that writes 1 to
``/logs/verifier/reward.txt`` when it exits 0 and 0 otherwise;
``max_agent_timeout_sec`` (default 360) and ``max_test_timeout_sec`` (default 60)
are the budgets; ``difficulty``, ``category`` (default ``software_engineering``)
and ``tags`` are the metadata; the compose service's ``environment`` becomes the
environment's variables and its ``working_dir`` the working directory. Then it
is a Harbor-layout task (:mod:`.layout`). The task's tests, solution and scripts
are never part of the image: a ``COPY .`` leaves them out, whether the image maps
onto a built-in one or is built (they are left out of its build context), unless
the Dockerfile copies ``tests`` or ``solution.sh`` by name, as Harbor's mapper
keeps them then.

Refused by name: an unknown ``task.yaml`` key, ``solution.yaml``, a compose file
with more than one service or keys other than ``services``/``version``, and in
the service anything but ``build``, ``image``, ``container_name``, ``command``,
``environment``, ``volumes`` (only Terminal-Bench's own log mounts),
``working_dir`` and ``expose``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sandbox.environments import ResourceRequest

from ..tasks import (
    MAX_TASK_YAML_BYTES,
    TASK_FILE,
    Task,
    TaskError,
    load_yaml_mapping,
    read_regular_file,
    read_tree,
    validation_error,
)
from .dockerfile import map_dockerfile
from .layout import EXIT_STATUS_REWARD, TEST_SCRIPT, HarborParts, build_task

__all__ = ["TerminalBenchConfig", "is_terminal_bench", "load_terminal_bench_task"]

COMPOSE_FILE: Final = "docker-compose.yaml"
RUN_TESTS: Final = "run-tests.sh"
SOLUTION: Final = "solution.sh"
OWN_ENTRIES: Final = frozenset(
    {TASK_FILE, COMPOSE_FILE, "docker-compose.yml", RUN_TESTS, SOLUTION, "tests"}
)
COPIED_BY_NAME: Final = {"tests": ("tests", "./tests"), SOLUTION: (SOLUTION, f"./{SOLUTION}")}
"""Entries a Dockerfile that names them (``COPY tests ...``) builds into the image, as
Harbor's mapper copies them into its environment directory."""
SERVICE_KEYS: Final = frozenset(
    {
        "build",
        "image",
        "container_name",
        "command",
        "environment",
        "volumes",
        "working_dir",
        "expose",
    }
)
TB_VOLUMES: Final = frozenset(
    {
        "${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}",
        "${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}",
    }
)
TB_ENV: Final = "TEST_DIR=${T_BENCH_TEST_DIR}"


class TerminalBenchConfig(BaseModel):
    """A Terminal-Bench ``task.yaml``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    instruction: Annotated[str, Field(min_length=1)]
    author_name: str = "unknown"
    author_email: str = "unknown"
    difficulty: Literal["easy", "medium", "hard", "unknown"] = "unknown"
    category: str = "software_engineering"
    tags: list[str] = Field(default_factory=list)
    parser_name: Literal["pytest"] = "pytest"
    max_agent_timeout_sec: float = 360.0
    max_test_timeout_sec: float = 60.0
    run_tests_in_same_shell: bool = False
    disable_asciinema: bool = False
    estimated_duration_sec: float | None = None
    expert_time_estimate_min: float | None = None
    junior_time_estimate_min: float | None = None


_ALLOWED_KEYS: Final = {"": sorted(TerminalBenchConfig.model_fields)}


def is_terminal_bench(directory: Path) -> bool:
    """A ``task.yaml`` with Terminal-Bench's own files beside it (run-tests.sh, a Dockerfile)."""
    return os.path.lexists(directory / TASK_FILE) and any(
        os.path.lexists(directory / name)
        for name in (RUN_TESTS, "Dockerfile", COMPOSE_FILE, SOLUTION)
    )


def _read_text(path: Path, limit: int) -> tuple[bytes, str]:
    raw, _ = read_regular_file(path, str(path), limit)
    try:
        return raw, raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TaskError("not UTF-8; save it as UTF-8", source=str(path)) from None


def _service(task_dir: Path) -> tuple[bytes, dict[str, Any]]:
    """The compose file's text and its one service (no compose file: an empty service)."""
    path = task_dir / COMPOSE_FILE
    if not path.exists():
        if (task_dir / "docker-compose.yml").exists():
            raise TaskError(f"name it {COMPOSE_FILE}", source=str(task_dir / "docker-compose.yml"))
        return b"", {}
    raw, text = _read_text(path, MAX_TASK_YAML_BYTES)
    source = str(path)
    data = load_yaml_mapping(text, source)
    extra = sorted(set(data) - {"services", "version"})
    if extra:
        raise TaskError(
            "only 'services' (one) and 'version' are supported; remove it",
            source=source,
            key=extra[0],
        )
    services = data.get("services")
    if not isinstance(services, dict) or len(services) != 1:
        count = len(services) if isinstance(services, dict) else 0
        raise TaskError(
            f"{count} services: only a single-service environment is supported (Harbor's "
            "docker-compose environments with sidecars do not run here); keep one service",
            source=source,
            key="services",
        )
    name, service = next(iter(services.items()))
    if not isinstance(service, dict):
        raise TaskError("a service is a mapping", source=source, key=f"services.{name}")
    for key, value in service.items():
        where = f"services.{name}.{key}"
        if key not in SERVICE_KEYS:
            raise TaskError(
                f"not supported (the keys supported are {', '.join(sorted(SERVICE_KEYS))}); "
                "move it into the Dockerfile or remove it",
                source=source,
                key=where,
            )
        if key == "volumes" and not (isinstance(value, list) and set(value) <= TB_VOLUMES):
            raise TaskError(
                "only Terminal-Bench's own log mounts are supported; remove the others",
                source=source,
                key=where,
            )
    return raw, service


def _service_env(service: dict[str, Any], source: str, name: str) -> dict[str, str]:
    env = service.get("environment", [])
    pairs: dict[str, str] = {}
    items = env.items() if isinstance(env, dict) else [tuple(str(e).split("=", 1)) for e in env]
    for item in items:
        key, value = (item[0], item[1]) if len(item) == 2 else (item[0], "")
        if f"{key}={value}" == TB_ENV:
            continue
        if "${" in str(value):
            raise TaskError(
                "host variable templates (${...}) are refused; write the value",
                source=source,
                key=f"services.{name}.environment.{key}",
            )
        pairs[str(key)] = str(value)
    return pairs


def load_terminal_bench_task(path: Path | str) -> Task:
    """Load a legacy Terminal-Bench task directory; raises :class:`TaskError`."""
    task_dir = Path(path)
    if (task_dir / "solution.yaml").exists():
        raise TaskError(
            "solution.yaml is not supported (nor by Harbor's mapper); convert it to solution.sh",
            source=str(task_dir / "solution.yaml"),
        )
    config_path = task_dir / TASK_FILE
    raw, text = _read_text(config_path, MAX_TASK_YAML_BYTES)
    data = load_yaml_mapping(text, str(config_path))
    if "descriptions" in data:
        raise TaskError(
            "the older 'descriptions' list is not supported; write 'instruction:'",
            source=str(config_path),
            key="descriptions",
        )
    try:
        config = TerminalBenchConfig.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, source=str(config_path), allowed_keys=_ALLOWED_KEYS) from None
    compose_raw, service = _service(task_dir)
    compose_source = str(task_dir / COMPOSE_FILE)
    build = service.get("build", {})
    context_name = build if isinstance(build, str) else (build or {}).get("context", ".")
    dockerfile_name = (
        (build or {}).get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
    )
    context = (task_dir / str(context_name)).resolve()
    if task_dir.resolve() not in (context, *context.parents):
        raise TaskError(
            "the build context leaves the task directory", source=compose_source, key="build"
        )
    dockerfile = context / str(dockerfile_name)
    if not dockerfile.exists():
        raise TaskError(
            "missing: a Terminal-Bench task builds its Dockerfile", source=str(dockerfile)
        )
    working_dir = service.get("working_dir")
    workdir = working_dir if isinstance(working_dir, str) and "${" not in working_dir else None
    mapped = map_dockerfile(dockerfile, context, workdir=workdir, exclude=OWN_ENTRIES)
    text = dockerfile.read_text(errors="replace")
    named = {
        entry
        for entry, spellings in COPIED_BY_NAME.items()
        if any(f"{verb} {word}" in text for verb in ("COPY", "ADD") for word in spellings)
    }
    run_tests = task_dir / RUN_TESTS
    if not run_tests.exists():
        raise TaskError(
            "missing: write run-tests.sh (it runs tests/ and exits 0 on a pass)",
            source=str(run_tests),
        )
    script_raw, script = _read_text(run_tests, MAX_TASK_YAML_BYTES)
    if not script.endswith("\n"):
        script += "\n"
    tests, _ = read_tree(task_dir, "tests", required=False)
    tests[TEST_SCRIPT] = (script + EXIT_STATUS_REWARD).replace("$TEST_DIR", "/tests").encode()
    solve = None
    if (task_dir / SOLUTION).exists():
        solve, _ = read_regular_file(
            task_dir / SOLUTION, str(task_dir / SOLUTION), MAX_TASK_YAML_BYTES
        )
    notes = ["the verdict is run-tests.sh's exit status (as Harbor's mapper makes it)"]
    service_name = "service"
    parts = HarborParts(
        task_dir=task_dir,
        format="terminal-bench",
        config_text=raw + compose_raw + script_raw,
        instruction=config.instruction,
        tests=tests,
        solve=solve,
        environment=mapped,
        dockerfile=dockerfile,
        image_name=None,
        context_exclude=tuple(sorted(OWN_ENTRIES - named)) if context == task_dir.resolve() else (),
        workdir=mapped.workdir,
        agent_timeout_s=config.max_agent_timeout_sec,
        tests_timeout_s=config.max_test_timeout_sec,
        resources=ResourceRequest(),
        env=_service_env(service, compose_source, service_name),
        category=config.category,
        difficulty=None if config.difficulty == "unknown" else config.difficulty,
        tags=list(config.tags),
        notes=notes,
    )
    return build_task(parts, source=str(config_path))
