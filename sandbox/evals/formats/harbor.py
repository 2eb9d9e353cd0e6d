"""Harbor tasks (``task.toml``), as the current ``harbor`` release writes them (``harbor init``).

A task directory::

    task.toml         schema_version, [task], [metadata], [verifier], [agent], [environment],
                      [solution]
    instruction.md    what the agent is asked to do
    environment/      Dockerfile and its build context (or [environment] docker_image)
    solution/solve.sh the reference solution (optional)
    tests/test.sh     the verifier: writes /logs/verifier/reward.txt or reward.json
    tests/Dockerfile  the separate verifier's image (environment_mode = "separate")

``task.toml`` is read with :mod:`tomllib` (so duplicate keys are refused) into a
strict model of Harbor's ``TaskConfig`` (schema 1.x, up to
:data:`SCHEMA_VERSION`): every key Harbor knows is known here, any other is
refused by name with the keys allowed in its table. Keys Harbor knows but this
platform cannot honour are refused by name too, with the fix
(:func:`_unsupported`). How the fields map:

- ``[agent] timeout_sec`` and ``[verifier] timeout_sec``: the agent's and the tests' budgets.
- ``[environment]``: ``cpus``, ``memory_mb``, ``storage_mb`` (and the older ``memory``,
  ``storage`` as ``"2G"``) become the resource request; ``network_mode`` ``no-network``
  none, ``allowlist`` its ``allowed_hosts``, ``public`` is lowered to none (the
  platform gives no open network; the task's notes say so); ``env`` literal values
  (``${VAR}`` host templates are refused: no host variable enters a sandbox);
  ``build_timeout_sec``; ``docker_image`` or ``environment/Dockerfile``;
  ``workdir`` (else the Dockerfile's last ``WORKDIR``).
- ``[agent] user``: omitted, ``sandbox`` or 10001, the platform's sandbox uid;
  ``root`` or 0, a root agent (gVisor only, by the environment builder).
- ``[verifier] user``: omitted or ``judge``, the judge uid; ``root`` or 0, root, as
  Harbor runs it (gVisor only): then, as for a root agent, the tests run in a fresh
  root session of the environment given the agent's working directory (:mod:`.layout`).
- ``[verifier] env`` is exported for ``tests/test.sh``, which runs (as the judge
  unless root) after every process of the agent is killed, with the links leading out
  of the agent's work removed (what Harbor's artifact copy keeps) and the
  agent's programs re-run through ``agent-run`` as the sandbox uid
  (:mod:`.layout`). ``environment_mode`` ``shared``, and ``separate`` without an
  image of its own (Harbor's fresh copy of ``[environment]``): on the agent's
  own session, and so does a verifier image that is the agent's with the tests only
  bundled in. ``separate`` with an image of its own (``[verifier.environment]
  docker_image``, else ``tests/Dockerfile``, built like the agent's, aliases
  applied; its resources, ``env`` and ``workdir`` from ``[verifier.environment]``,
  else ``[environment]``, as Harbor resolves them): in a fresh session of that
  environment, given only the ``artifacts`` (the working directory, copied to
  the same path, as Harbor's artifact handler re-materialises them).
- ``[metadata]`` is free-form in Harbor: ``category``, ``difficulty`` (easy, medium,
  hard; others unrated) and ``tags`` are read, other keys kept unread.
- ``[task]`` (name, version, description, authors, keywords) and ``source`` are
  accepted and not used; the task's id is its directory's name.

Paths and the verifier: :mod:`.layout`.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sandbox.environments import ResourceRequest

from ..tasks import (
    MAX_INSTRUCTION_CHARS,
    MAX_TASK_YAML_BYTES,
    OPTIONAL_ENTRIES,
    SKIPPED_DIRS,
    TASK_ID_RE,
    Task,
    TaskError,
    read_regular_file,
    read_tree,
    validation_error,
)
from .dockerfile import bundling_base, map_dockerfile, workdir_of
from .layout import TEST_SCRIPT, HarborParts, SeparateVerifier, build_task

__all__ = ["CONFIG_FILE", "HarborConfig", "load_harbor_task", "parse_harbor_config"]

CONFIG_FILE: Final = "task.toml"
INSTRUCTION_FILE: Final = "instruction.md"
SCHEMA_VERSION: Final = (1, 4)
HARBOR_ENTRIES: Final = frozenset(
    {CONFIG_FILE, INSTRUCTION_FILE, "environment", "solution", "tests", ".gitignore"}
)
SANDBOX_USER: Final = ("sandbox", 10001, "10001")
"""``[agent] user`` values naming the platform's sandbox uid (what an omitted user means)."""
_SIZE_RE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([GMK])\s*$", re.IGNORECASE)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Author(_Model):
    name: str
    email: str | None = None


class PackageSection(_Model):
    """``[task]``: the package's identity in Harbor's registry (not used here)."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")]
    version: str | None = None
    description: str = ""
    authors: list[Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class _Network(_Model):
    network_mode: Literal["no-network", "public", "allowlist"] | None = None
    allowed_hosts: list[str] | None = None


class EnvironmentSection(_Network):
    """``[environment]`` (and ``[verifier.environment]``)."""

    build_timeout_sec: float = 600.0
    docker_image: str | None = None
    os: Literal["linux", "windows", "Linux", "Windows"] = "linux"
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    memory: str | None = None
    storage: str | None = None
    gpus: int | None = None
    gpu_types: list[str] | None = None
    tpu: dict[str, Any] | None = None
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    skills_dir: str | None = None
    healthcheck: dict[str, Any] | None = None
    workdir: str | None = None
    allow_internet: bool | None = None


class VerifierSection(_Network):
    timeout_sec: float = 600.0
    env: dict[str, str] = Field(default_factory=dict)
    user: str | int | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    environment: EnvironmentSection | None = None
    collect: list[dict[str, Any]] = Field(default_factory=list)


class AgentSection(_Network):
    timeout_sec: float | None = None
    user: str | int | None = None


class SolutionSection(_Model):
    env: dict[str, str] = Field(default_factory=dict)


class HarborConfig(_Model):
    """``task.toml``: Harbor's ``TaskConfig``, every key checked."""

    schema_version: str = "1.4"
    version: str | None = None
    task: PackageSection | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierSection = VerifierSection()
    agent: AgentSection = AgentSection()
    environment: EnvironmentSection = EnvironmentSection()
    solution: SolutionSection = SolutionSection()
    source: str | None = None
    multi_step_reward_strategy: str | None = None
    steps: list[dict[str, Any]] | None = None
    artifacts: list[str | dict[str, Any]] = Field(default_factory=list)


_ALLOWED_KEYS: Final[dict[str, list[str]]] = {
    "": sorted(HarborConfig.model_fields),
    "task": sorted(PackageSection.model_fields),
    "verifier": sorted(VerifierSection.model_fields),
    "verifier.environment": sorted(EnvironmentSection.model_fields),
    "agent": sorted(AgentSection.model_fields),
    "environment": sorted(EnvironmentSection.model_fields),
    "solution": sorted(SolutionSection.model_fields),
}


def parse_harbor_config(text: str, *, source: str) -> HarborConfig:
    """Validate the text of a ``task.toml``; raises :class:`TaskError` naming the key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"invalid TOML: {exc}; fix the syntax", source=source) from None
    try:
        config = HarborConfig.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, source=source, allowed_keys=_ALLOWED_KEYS) from None
    version = config.version if "schema_version" not in data and config.version else None
    shown = version or config.schema_version
    match = re.fullmatch(r"(\d+)\.(\d+)", shown)
    if match is None or int(match[1]) != SCHEMA_VERSION[0] or int(match[2]) > SCHEMA_VERSION[1]:
        raise TaskError(
            f"schema {shown!r} is not one this platform reads (1.0 to "
            f"{SCHEMA_VERSION[0]}.{SCHEMA_VERSION[1]}); write it with that Harbor release",
            source=source,
            key="schema_version",
        )
    return config


def _unsupported(config: HarborConfig) -> tuple[str, str] | None:
    """The first key Harbor knows that this platform cannot honour: (key, why and the fix)."""
    env = config.environment
    checks: list[tuple[bool, str, str]] = [
        (config.steps is not None, "steps", "multi-step tasks are not supported; split them"),
        (
            config.multi_step_reward_strategy is not None,
            "multi_step_reward_strategy",
            "only for multi-step tasks; remove it",
        ),
    ]
    sections = [("environment", env), ("verifier.environment", config.verifier.environment)]
    for name, section in sections:
        if section is None:
            continue
        checks += [
            (section.os.lower() != "linux", f"{name}.os", "only linux containers run here"),
            (bool(section.gpus), f"{name}.gpus", "no GPUs here; remove it"),
            (bool(section.gpu_types), f"{name}.gpu_types", "no GPUs here; remove it"),
            (section.tpu is not None, f"{name}.tpu", "no TPUs here; remove it"),
            (bool(section.mcp_servers), f"{name}.mcp_servers", "MCP servers are not supported"),
            (
                section.skills_dir is not None,
                f"{name}.skills_dir",
                "agent skills are not supported",
            ),
            (
                section.healthcheck is not None,
                f"{name}.healthcheck",
                "health checks are not supported; make the task ready without one",
            ),
        ]
    checks += [
        (
            bool(config.verifier.collect),
            "verifier.collect",
            "collect hooks need compose services; remove them",
        ),
        (
            config.verifier.user not in (None, "root", 0, "judge"),
            "verifier.user",
            "the tests run as the platform's judge uid (omitted, or 'judge') or as root "
            "('root' or 0, gVisor only); write one of those",
        ),
        (
            config.verifier.network_mode is not None or config.verifier.allowed_hosts is not None,
            "verifier.network_mode",
            "the tests run with the task's own network; remove the override",
        ),
        (
            config.agent.network_mode is not None or config.agent.allowed_hosts is not None,
            "agent.network_mode",
            "set the network in [environment]; remove the override",
        ),
        (
            bool(config.solution.env),
            "solution.env",
            "the reference solution gets no variables; set them in solve.sh",
        ),
    ]
    for failed, key, why in checks:
        if failed:
            return key, why
    user = config.agent.user
    if user is not None and user not in ("root", 0, *SANDBOX_USER):
        return (
            "agent.user",
            f"the agent runs as the platform's sandbox uid, or root (gVisor only); "
            f"{user!r} cannot be honoured: remove it, or write 'sandbox' (uid 10001) or 'root'",
        )
    variables = [("environment.env", env.env), ("verifier.env", config.verifier.env)]
    if config.verifier.environment is not None:
        variables.append(("verifier.environment.env", config.verifier.environment.env))
    for table, values in variables:
        for variable, value in values.items():
            if "${" in value:
                return (
                    f"{table}.{variable}",
                    "host variable templates (${...}) are refused: no host variable "
                    "enters a sandbox; write the value",
                )
    return None


def _size_mb(value: str, source: str, key: str) -> int:
    match = _SIZE_RE.match(value)
    if match is None:
        raise TaskError(f"{value!r} is not a size like '2G' or '512M'", source=source, key=key)
    number, unit = float(match[1]), match[2].upper()
    return max(1, int(number * {"G": 1024, "M": 1, "K": 1 / 1024}[unit]))


def _resources(env: EnvironmentSection, source: str, notes: list[str]) -> ResourceRequest:
    memory = env.memory_mb
    if env.memory is not None:
        memory = _size_mb(env.memory, source, "environment.memory")
    storage = env.storage_mb
    if env.storage is not None:
        storage = _size_mb(env.storage, source, "environment.storage")
    mode = env.network_mode
    if mode is None:
        mode = "public" if env.allow_internet in (None, True) else "no-network"
    hosts: tuple[str, ...] = ()
    if mode == "allowlist":
        hosts = tuple(env.allowed_hosts or ())
    elif env.allowed_hosts:
        raise TaskError(
            "allowed_hosts is only valid with network_mode = 'allowlist'",
            source=source,
            key="environment.allowed_hosts",
        )
    if mode == "public":
        notes.append("network_mode 'public' lowered to no network (the platform gives none)")
    try:
        return ResourceRequest(
            cpus=env.cpus, memory_mb=memory, storage_mb=storage, network_allow=hosts
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise TaskError(
            f"{first['msg']} (got {first.get('input')!r}); change it",
            source=source,
            key=f"environment.{first['loc'][0]}",
        ) from None


def _check_entries(task_dir: Path) -> None:
    known = HARBOR_ENTRIES | OPTIONAL_ENTRIES
    for entry in sorted(os.listdir(task_dir)):
        if entry in known or entry in SKIPPED_DIRS:
            continue
        why = {
            "steps": "multi-step tasks are not supported",
            "trajectory.json": "prior agent context (trajectory.json) is not supported",
            ".harborignore": "file filters are not supported; remove the files instead",
        }.get(entry, f"a Harbor task holds only {', '.join(sorted(known))}")
        raise TaskError(f"unexpected entry {entry!r}: {why}", source=str(task_dir))


def _text(path: Path, limit: int) -> str:
    data, _ = read_regular_file(path, str(path), limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(
            f"not UTF-8 (byte {exc.start}); save it as UTF-8", source=str(path)
        ) from None


def _solve_script(task_dir: Path) -> bytes | None:
    solution, _ = read_tree(task_dir, "solution", required=False)
    others = sorted(p for p in solution if p != "solve.sh")
    if others:
        raise TaskError(
            f"holds {', '.join(others[:5])} beside solve.sh: solution files other than solve.sh "
            "are not supported; write them from solve.sh",
            source=str(task_dir / "solution"),
        )
    return solution.get("solve.sh")


def _separate_verifier(
    task_dir: Path, config: HarborConfig, agent_image: str | None, source: str
) -> SeparateVerifier | None:
    """Harbor's separate verifier when it has an image of its own, as Harbor resolves it:
    ``[verifier.environment] docker_image``, else ``tests/Dockerfile``. None when the tests
    run in the agent's session: shared mode, a fresh copy of ``[environment]``, or the
    agent's image (``agent_image``: a built-in image its Dockerfile only lays files over,
    or its ``docker_image``) with the tests only bundled in (the platform puts them in
    place itself)."""
    verifier = config.verifier
    mode = verifier.environment_mode or ("separate" if verifier.environment else "shared")
    if mode == "shared":
        return None
    env = verifier.environment or config.environment
    dockerfile = task_dir / "tests" / "Dockerfile"
    if verifier.environment is not None and verifier.environment.docker_image:
        if verifier.environment.docker_image == agent_image:
            return None
        found: dict[str, Any] = {"dockerfile": None, "image": verifier.environment.docker_image}
        workdir = env.workdir
    elif dockerfile.exists():
        if agent_image is not None and bundling_base(dockerfile) == agent_image:
            return None
        found = {"dockerfile": dockerfile, "image": None}
        workdir = env.workdir or workdir_of(_text(dockerfile, 256 * 1024))
    else:
        return None  # a fresh copy of [environment]: the agent's own image
    return SeparateVerifier(
        **found,
        workdir=workdir,
        resources=_resources(env, source, []),
        env=dict(env.env),
        build_timeout_s=env.build_timeout_sec,
    )


def load_harbor_task(path: Path | str) -> Task:
    """Load a Harbor task directory; raises :class:`TaskError` naming the file, key and fix."""
    task_dir = Path(path)
    label = str(task_dir)
    info = task_dir.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise TaskError("a task is a plain directory (not a link or a file)", source=label)
    if not TASK_ID_RE.fullmatch(task_dir.resolve().name):
        raise TaskError(
            "the directory name is the task's id: use letters, digits, '.', '_' and '-'",
            source=label,
        )
    _check_entries(task_dir)
    config_path = task_dir / CONFIG_FILE
    raw, _ = read_regular_file(config_path, str(config_path), MAX_TASK_YAML_BYTES)
    source = str(config_path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TaskError("not UTF-8; save it as UTF-8", source=source) from None
    config = parse_harbor_config(text, source=source)
    problem = _unsupported(config)
    if problem is not None:
        raise TaskError(problem[1], source=source, key=problem[0])
    instruction = _text(task_dir / INSTRUCTION_FILE, MAX_INSTRUCTION_CHARS * 4)
    if not instruction.strip():
        raise TaskError(
            "is empty; describe the agent's task", source=str(task_dir / INSTRUCTION_FILE)
        )
    tests, _ = read_tree(task_dir, "tests", required=True)
    if TEST_SCRIPT not in tests:
        raise TaskError(
            f"has no {TEST_SCRIPT}; the verifier is tests/{TEST_SCRIPT}",
            source=str(task_dir / "tests"),
        )
    notes: list[str] = []
    env = config.environment
    environment_dir = task_dir / "environment"
    if (environment_dir / "docker-compose.yaml").exists() or (
        environment_dir / "docker-compose.yml"
    ).exists():
        raise TaskError(
            "a docker-compose environment (several services) is not supported; give one Dockerfile",
            source=str(environment_dir),
        )
    dockerfile = environment_dir / "Dockerfile"
    mapped = None
    workdir = env.workdir
    if env.docker_image is None:
        if not dockerfile.exists():
            raise TaskError(
                "missing: give environment/Dockerfile or [environment] docker_image",
                source=str(dockerfile),
            )
        mapped = map_dockerfile(dockerfile, environment_dir, workdir=env.workdir)
        workdir = mapped.workdir
        agent_image = mapped.base if mapped.image is not None else None  # else built on it
    else:
        agent_image = env.docker_image
        if dockerfile.exists():
            notes.append("docker_image is used; environment/Dockerfile is not built")
            workdir = workdir or workdir_of(_text(dockerfile, 256 * 1024))
        if workdir is None:
            workdir = "/app"
            notes.append("docker_image without workdir: the working directory is taken as /app")
    for artifact in config.artifacts:
        if artifact not in (workdir, f"{workdir}/"):
            raise TaskError(
                f"artifact {artifact!r}: only the working directory ({workdir}) is handed to "
                "the verifier here; remove it",
                source=source,
                key="artifacts",
            )
    if config.agent.user is None or config.agent.user in SANDBOX_USER:
        notes.append("the agent runs as the platform's sandbox uid (not the image's user)")
    metadata = config.metadata
    difficulty = metadata.get("difficulty")
    tags = metadata.get("tags")
    category = metadata.get("category")
    parts = HarborParts(
        task_dir=task_dir,
        format="harbor",
        config_text=raw,
        instruction=instruction,
        tests=tests,
        solve=_solve_script(task_dir),
        environment=mapped,
        dockerfile=dockerfile if mapped is not None else None,
        image_name=env.docker_image,
        workdir=workdir,
        agent_timeout_s=config.agent.timeout_sec or 600.0,
        tests_timeout_s=config.verifier.timeout_sec,
        resources=_resources(env, source, notes),
        env=dict(env.env),
        verifier_env=dict(config.verifier.env),
        root=config.agent.user in ("root", 0),
        verifier_root=config.verifier.user in ("root", 0),
        build_timeout_s=env.build_timeout_sec,
        verifier=_separate_verifier(task_dir, config, agent_image, source),
        artifacts=[str(a) for a in config.artifacts],
        category=category if isinstance(category, str) and category else "uncategorized",
        difficulty=difficulty if difficulty in ("easy", "medium", "hard") else None,
        tags=[t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
        notes=notes,
    )
    return build_task(parts, source=source)
