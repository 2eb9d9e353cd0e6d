"""Loading and validating task directories (the format is in :mod:`sandbox.evals`).

Loading is strict, like policies: ``task.yaml`` is plain YAML data (one
document, a mapping, no tags, anchors, aliases or duplicate keys, at most
:data:`MAX_TASK_YAML_BYTES`), every key is known and exactly typed; ``files/``,
``tests/`` and ``solution/`` are read as bytes, below the platform's caps on
files per request, and anything that is not a plain file or directory (a
symlink, a device, a FIFO) is refused rather than followed; caches such as
``__pycache__`` are skipped. Every refusal is a
:class:`TaskError` naming the file, the key and what to change.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from sandbox.core.validation import MAX_FILES, MAX_FILES_BYTES, check_relative_path
from sandbox.environments import EnvironmentSpec, ResourceRequest
from sandbox.errors import InvalidRequestError

__all__ = [
    "AgentBudget",
    "Task",
    "TaskConfig",
    "TaskError",
    "TestSpec",
    "load_task",
    "load_tasks",
]

TASK_FILE: Final = "task.yaml"
FILES_DIR: Final = "files"
TESTS_DIR: Final = "tests"
SOLUTION_DIR: Final = "solution"
SOLVE_SCRIPT: Final = "solve.sh"
ENVIRONMENT_DIR: Final = "environment"
#: Folders of ``sandbox/evals`` holding shipped tasks: data, not library code.
SHIPPED_TASK_DIRS: Final = frozenset({"suite", "harbor_suite"})
"""A task's own build context (``environment: {dockerfile: environment/Dockerfile}``)."""
OPTIONAL_ENTRIES: Final = frozenset({"README.md", ENVIRONMENT_DIR})
"""Other entries a task directory may hold (ignored by the evaluator)."""
SKIPPED_DIRS: Final = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
"""Caches that running a task's code locally leaves behind: never part of a task."""

MAX_TASK_YAML_BYTES: Final = 64 * 1024
MAX_INSTRUCTION_CHARS: Final = 32 * 1024
MAX_SETUP_CHARS: Final = 16 * 1024
MAX_COMMAND_CHARS: Final = 4 * 1024
MAX_TAGS: Final = 32
MAX_FILE_BYTES: Final = 8 * 1024 * 1024
MAX_TREE_FILES: Final = MAX_FILES
MAX_TREE_BYTES: Final = MAX_FILES_BYTES
MAX_TREE_DEPTH: Final = 16
MAX_TASKS: Final = 10_000
MAX_AGENT_TIMEOUT_S: Final = 6 * 3600.0
MAX_AGENT_STEPS: Final = 10_000
MAX_TEST_TIMEOUT_S: Final = 3600.0
BUILTIN_IMAGES: Final = {"sandbox-python": "python", "sandbox-polyglot": "polyglot"}
"""The names a task's environment may give our built-in images, and the ``image`` each is."""
TASK_ID_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")

# A command that runs pytest, or writes a report, would be judged by evidence the code
# under test can forge (its exit status, a file it can write): ``framework: pytest``.
_FORGEABLE_COMMAND: Final = re.compile(r"\bpytest\b|junit|/judge/report\.xml", re.IGNORECASE)


class TaskError(InvalidRequestError):
    """A task directory or ``task.yaml`` is refused.

    ``source`` names the file or directory, ``key`` the dotted key in task.yaml.
    """

    def __init__(self, message: str, *, source: str, key: str = "") -> None:
        self.source = source
        self.key = key
        self.reason = message
        super().__init__(f"{source}: {key}: {message}" if key else f"{source}: {message}")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class AgentBudget(_Model):
    """What the agent may spend before it is stopped."""

    timeout_s: Annotated[float, Field(gt=0, le=MAX_AGENT_TIMEOUT_S, allow_inf_nan=False)] = 600.0
    max_steps: Annotated[int, Field(ge=1, le=MAX_AGENT_STEPS)] = 50


class TestSpec(_Model):
    """How the hidden tests are run once the agent has stopped (the formats: :mod:`sandbox.evals`).

    ``framework: pytest`` (the default when there is no ``command``): the platform
    runs pytest on ``tests/`` itself and takes the verdict from its own plugin's
    report channel. ``command``: a shell command judged by its exit status alone;
    it runs the agent's programs as the sandbox uid (``agent-run``, and ``$WORK`` is
    the workspace, closed to the judge: :mod:`sandbox.core.agent_code`) unless
    ``isolate_agent`` is false, which lets them read the hidden tests.
    """

    __test__ = False  # not a pytest class

    framework: Literal["pytest"] | None = None
    command: Annotated[str, Field(min_length=1, max_length=MAX_COMMAND_CHARS)] | None = None
    timeout_s: Annotated[float, Field(gt=0, le=MAX_TEST_TIMEOUT_S, allow_inf_nan=False)] = 120.0
    isolate_agent: bool = True

    @field_validator("command")
    @classmethod
    def _unforgeable(cls, command: str | None) -> str | None:
        if command is not None and _FORGEABLE_COMMAND.search(command):
            raise ValueError(
                "a command that runs pytest or writes a JUnit report is judged by evidence the "
                "code under test can forge (its exit status, a file it can write); remove "
                "'command' and write 'framework: pytest': the platform runs pytest on tests/ "
                "and takes each test's outcome from a channel only it reads"
            )
        return command

    @model_validator(mode="after")
    def _one_way_to_judge(self) -> TestSpec:
        if self.framework is not None and self.command is not None:
            raise ValueError(
                "give either 'framework: pytest' (the platform runs pytest on tests/) or "
                "'command' (a shell command judged by its exit status), not both"
            )
        if not self.isolate_agent and self.command is None:
            raise ValueError(
                "'isolate_agent' applies to a 'command' only (pytest imports the agent's "
                "code into the test process); remove it"
            )
        return self

    @property
    def pytest(self) -> bool:
        """True when the platform runs the hidden tests with pytest (no ``command``)."""
        return self.command is None


class TaskEnvironment(_Model):
    """``environment:`` in ``task.yaml``: the task's own Dockerfile (or an image) and its request.

    ``dockerfile`` is relative to the task directory, below ``environment/`` (the
    build context is its folder); the policy is ``policy``, never loosened.
    """

    dockerfile: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    image: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    cpus: Annotated[float, Field(gt=0, le=64, allow_inf_nan=False, strict=False)] | None = None
    memory_mb: Annotated[int, Field(gt=0)] | None = None
    storage_mb: Annotated[int, Field(gt=0)] | None = None
    network_allow: Annotated[list[str], Field(max_length=64)] = Field(default_factory=list)
    root: bool = False
    build_timeout_s: Annotated[float, Field(gt=0, le=7200, allow_inf_nan=False, strict=False)] = (
        600.0
    )

    @model_validator(mode="after")
    def _one_source(self) -> TaskEnvironment:
        if (self.dockerfile is None) == (self.image is None):
            raise ValueError(
                "give exactly one of 'dockerfile' (e.g. environment/Dockerfile) or 'image'"
            )
        if self.dockerfile is not None:
            parts = PurePosixPath(self.dockerfile).parts
            if parts[:1] != (ENVIRONMENT_DIR,) or ".." in parts or len(parts) < 2:
                raise ValueError(
                    f"dockerfile {self.dockerfile!r} must be a path below {ENVIRONMENT_DIR}/, "
                    f"e.g. {ENVIRONMENT_DIR}/Dockerfile"
                )
        return self

    def spec(self, task_dir: Path, policy: str) -> EnvironmentSpec:
        """The :class:`EnvironmentSpec` of this task directory under base policy ``policy``."""
        resources = ResourceRequest(
            cpus=self.cpus,
            memory_mb=self.memory_mb,
            storage_mb=self.storage_mb,
            network_allow=tuple(self.network_allow),
        )
        dockerfile = None
        if self.dockerfile is not None:
            dockerfile = task_dir.resolve().joinpath(*PurePosixPath(self.dockerfile).parts)
        return EnvironmentSpec(
            dockerfile=dockerfile,
            image=self.image,
            base_policy=policy,
            resources=resources,
            root=self.root,
            build_timeout_s=self.build_timeout_s,
        )


class TaskConfig(_Model):
    """``task.yaml``."""

    instruction: Annotated[str, Field(min_length=1, max_length=MAX_INSTRUCTION_CHARS)]
    image: Literal["python", "polyglot"] = "python"
    policy: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")] = "default"
    setup: Annotated[str, Field(min_length=1, max_length=MAX_SETUP_CHARS)] | None = None
    agent: AgentBudget = AgentBudget()
    tests: TestSpec = TestSpec()
    category: Annotated[str, Field(min_length=1, max_length=64)] = "uncategorized"
    difficulty: Literal["easy", "medium", "hard"] | None = None
    tags: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=64)]], Field(max_length=MAX_TAGS)
    ] = Field(default_factory=list)
    environment: TaskEnvironment | None = None


@dataclass(frozen=True)
class Task:
    """A loaded task: its configuration and its three file trees, as bytes."""

    id: str
    path: Path
    config: TaskConfig
    files: Mapping[str, bytes]
    tests: Mapping[str, bytes]
    solution: Mapping[str, bytes]
    executable: frozenset[str] = field(default_factory=frozenset)
    """Paths in ``files`` with an executable bit (restored in the workspace)."""
    solution_executable: frozenset[str] = field(default_factory=frozenset)
    digest: str = ""
    """sha256 over task.yaml and every file: a changed task is a different task."""
    environment: EnvironmentSpec | None = None
    """The task's own environment (its Dockerfile or image); None: ``config.image``."""
    verifier_environment: EnvironmentSpec | None = None
    """Where the tests run when not in the agent's session (Harbor's separate verifier with
    an image of its own): a fresh session of this environment, given ``artifacts``."""
    artifacts: tuple[str, ...] = ()
    """The agent's directories a separate verifier gets (copied to the same paths)."""
    format: str = "sandbox"
    """The format it was read from: ``sandbox`` (task.yaml), ``harbor`` or ``terminal-bench``."""
    judged_by_reward: bool = False
    """The tests write a reward file (Harbor's verifier) and the reward, not the exit
    status, is the verdict (:mod:`sandbox.evals.reward_files`)."""
    notes: tuple[str, ...] = ()
    """What loading changed or left out (a lowered request, translated paths), for the report."""

    @property
    def solve_script(self) -> bytes | None:
        return self.solution.get(SOLVE_SCRIPT)

    @property
    def solution_files(self) -> dict[str, bytes]:
        """The solution's files laid over the workspace (everything but solve.sh)."""
        return {p: d for p, d in self.solution.items() if p != SOLVE_SCRIPT}

    @property
    def difficulty(self) -> str:
        return self.config.difficulty or "unrated"

    @property
    def root_agent(self) -> bool:
        """The agent runs as root (its environment asks for it; gVisor only)."""
        return self.environment is not None and self.environment.root

    @property
    def needs_own_environment(self) -> str | None:
        """Why this task needs the environment builder; None when it runs on ``config.image``.

        A task whose environment is a Dockerfile, sets variables, or wants the
        agent to be root, or whose verifier has an environment of its own, needs it;
        without it the evaluator refuses such a trial with this reason
        (:mod:`sandbox.evals.runner`).
        """
        env = self.environment
        if env is None:
            return None
        if env.dockerfile is not None:
            return f"its environment is built from {env.dockerfile}"
        if env.image is not None and env.image not in BUILTIN_IMAGES:
            return (
                f"its environment is the image {env.image!r}, not one of {sorted(BUILTIN_IMAGES)}"
            )
        if env.env:
            return f"its environment sets variables ({', '.join(sorted(env.env))})"
        if env.root:
            return "its agent runs as root"
        if self.verifier_environment is not None:
            return "its tests run in a separate verifier environment of their own"
        return None


# ------------------------------------------------------------------------------ YAML


def _line(mark: Any) -> str:
    return str(mark.line + 1) if mark is not None else "?"


def load_yaml_mapping(text: str, source: str) -> dict[str, Any]:
    """One plain YAML mapping: no tags, anchors, aliases, duplicate keys or nulls."""
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise TaskError(
                    f"line {_line(event.start_mark)}: anchors and aliases (&, *) are refused; "
                    "write the value out",
                    source=source,
                )
            tag = getattr(event, "tag", None)
            if tag is not None:
                raise TaskError(
                    f"line {_line(event.start_mark)}: the tag {tag!r} is refused; write plain data",
                    source=source,
                )
            if isinstance(event, yaml.DocumentStartEvent) and (event.version or event.tags):
                raise TaskError("YAML directives are refused; remove them", source=source)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.composer.ComposerError as exc:
        raise TaskError(
            f"holds more than one YAML document or cannot be composed ({exc.problem}); "
            "a task.yaml is exactly one document",
            source=source,
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "cannot be parsed"
        raise TaskError(
            f"invalid YAML at {where}{problem}; fix the syntax", source=source
        ) from None
    except yaml.YAMLError as exc:
        raise TaskError(f"invalid YAML: {exc}; fix the file", source=source) from None
    if node is None:
        raise TaskError("the file is empty; write at least 'instruction:'", source=source)
    _check_keys(node, (), source)
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise TaskError(
            f"the document is a {type(data).__name__}, not a mapping; start with 'instruction:'",
            source=source,
        )
    return data


def _check_keys(node: yaml.Node, path: tuple[str | int, ...], source: str) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                raise TaskError(
                    f"line {key_node.start_mark.line + 1}: keys must be plain strings",
                    source=source,
                    key=_dotted(path),
                )
            key = key_node.value
            if key == "<<":
                raise TaskError("merge keys (<<) are refused; write the keys out", source=source)
            if key in seen:
                raise TaskError(
                    f"duplicate key (first at line {seen[key]}); keep only one",
                    source=source,
                    key=_dotted((*path, key)),
                )
            seen[key] = key_node.start_mark.line + 1
            _check_keys(value_node, (*path, key), source)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_keys(item, (*path, index), source)
    elif node.tag == "tag:yaml.org,2002:null" and path:
        raise TaskError(
            "has no value (null); give it a value or remove the key",
            source=source,
            key=_dotted(path),
        )


def _dotted(path: tuple[str | int, ...] | list[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out


_ALLOWED_KEYS: Final[dict[str, list[str]]] = {
    "": sorted(TaskConfig.model_fields),
    "agent": sorted(AgentBudget.model_fields),
    "tests": sorted(TestSpec.model_fields),
}


def _describe(error: Mapping[str, Any], allowed_keys: Mapping[str, list[str]]) -> str:
    kind = error["type"]
    loc = error["loc"]
    value = error.get("input")
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    if kind == "extra_forbidden":
        key = str(loc[-1])
        allowed = allowed_keys.get(_dotted(list(loc[:-1])), [])
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown key {key!r}; the keys allowed here are {', '.join(allowed)}{hint}"
    if kind == "missing":
        return "is required; add it"
    if kind in ("int_type", "float_type"):
        quoted = "; write the number without quotes" if isinstance(value, str) else ""
        whole = "a whole number" if kind == "int_type" else "a number"
        return f"expected {whole}, got {type(value).__name__} {shown}{quoted}"
    if kind == "value_error":
        return str((error.get("ctx") or {}).get("error") or error["msg"])
    if kind == "literal_error":
        expected = (error.get("ctx") or {}).get("expected", "")
        return f"got {shown}; expected one of {expected}"
    return f"{error['msg']} (got {shown})"


def validation_error(
    exc: ValidationError, *, source: str, allowed_keys: Mapping[str, list[str]]
) -> TaskError:
    """A :class:`TaskError` naming the key and the fix of pydantic's first error (and more).

    ``allowed_keys`` maps a dotted section ("" the top) to the keys allowed there,
    for the message about an unknown key.
    """
    errors = exc.errors()
    first = errors[0]
    # A field's own location, without pydantic's union branch names.
    loc = [p for p in first["loc"] if not (isinstance(p, str) and "[" in p)]
    message = _describe(first, allowed_keys)
    if len(errors) > 1:
        message += ". Also: " + "; ".join(
            f"{_dotted(list(e['loc']))}: {_describe(e, allowed_keys)}" for e in errors[1:5]
        )
    return TaskError(message, source=source, key=_dotted(loc))


def parse_task_config(text: str, *, source: str) -> TaskConfig:
    """Validate the text of a ``task.yaml``; raises :class:`TaskError`."""
    data = load_yaml_mapping(text, source)
    try:
        return TaskConfig.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, source=source, allowed_keys=_ALLOWED_KEYS) from None


# ------------------------------------------------------------------------------ trees


def read_regular_file(path: Path, source: str, limit: int) -> tuple[bytes, bool]:
    """A regular file's bytes and whether it is executable; links are never followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise TaskError(f"cannot open: {exc.strerror}", source=source) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TaskError("not a regular file; remove it", source=source)
        if info.st_size > limit:
            raise TaskError(
                f"is {info.st_size} bytes; a task file may be at most {limit} bytes",
                source=source,
            )
        chunks = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise TaskError(f"grew past {limit} bytes while being read", source=source)
        return data, bool(info.st_mode & 0o111)
    finally:
        os.close(fd)


def _walk(root: Path, label: str) -> Iterator[tuple[str, Path]]:
    """``(relative posix path, path)`` of every file below ``root``, refusing links."""
    stack: list[tuple[Path, str, int]] = [(root, "", 0)]
    while stack:
        directory, prefix, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            raise TaskError(
                f"nested more than {MAX_TREE_DEPTH} directories deep; flatten it",
                source=str(directory),
            )
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            raise TaskError(f"cannot list: {exc.strerror}", source=str(directory)) from None
        for entry in entries:
            if entry.name in SKIPPED_DIRS and entry.is_dir(follow_symlinks=False):
                continue
            relative = f"{prefix}{entry.name}"
            where = f"{label}/{relative}"
            try:
                check_relative_path(relative)
            except InvalidRequestError:
                raise TaskError(
                    "a path the sandbox cannot take (too long or odd); rename it", source=where
                ) from None
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                raise TaskError(
                    "is a symbolic link; task trees hold plain files only (copy the target in)",
                    source=where,
                )
            if stat.S_ISDIR(info.st_mode):
                stack.append((Path(entry.path), relative + "/", depth + 1))
            elif stat.S_ISREG(info.st_mode):
                yield relative, Path(entry.path)
            else:
                raise TaskError("is neither a file nor a directory; remove it", source=where)


def read_tree(task_dir: Path, name: str, *, required: bool) -> tuple[dict[str, bytes], set[str]]:
    """Every file below ``task_dir/name`` as bytes, and the executable ones; links refused."""
    root = task_dir / name
    label = str(root)
    try:
        info = root.lstat()
    except FileNotFoundError:
        if required:
            raise TaskError(
                f"missing; a task needs {name}/ with at least one file", source=label
            ) from None
        return {}, set()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise TaskError("must be a plain directory (not a link or a file)", source=label)
    files: dict[str, bytes] = {}
    executable: set[str] = set()
    total = 0
    for relative, path in _walk(root, label):
        if len(files) >= MAX_TREE_FILES:
            raise TaskError(f"holds more than {MAX_TREE_FILES} files; trim it", source=label)
        data, is_exec = read_regular_file(path, f"{label}/{relative}", MAX_FILE_BYTES)
        total += len(data)
        if total > MAX_TREE_BYTES:
            raise TaskError(f"holds more than {MAX_TREE_BYTES} bytes; trim it", source=label)
        files[relative] = data
        if is_exec:
            executable.add(relative)
    if required and not files:
        raise TaskError(f"is empty; a task needs at least one file in {name}/", source=label)
    return files, executable


def task_digest(config_text: bytes, trees: Mapping[str, Mapping[str, bytes]]) -> str:
    """sha256 over the task's configuration text and every file of its trees."""
    h = hashlib.sha256()
    h.update(b"task.yaml\0" + hashlib.sha256(config_text).digest())
    for tree in sorted(trees):
        for path in sorted(trees[tree]):
            h.update(f"{tree}/{path}\0".encode() + hashlib.sha256(trees[tree][path]).digest())
    return h.hexdigest()


def load_task(path: Path | str) -> Task:
    """Load one task directory; raises :class:`TaskError` naming what is wrong."""
    task_dir = Path(path)
    label = str(task_dir)
    try:
        info = task_dir.lstat()
    except FileNotFoundError:
        raise TaskError("no such directory; check the path", source=label) from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise TaskError("a task is a plain directory (not a link or a file)", source=label)
    task_id = task_dir.resolve().name
    if not TASK_ID_RE.fullmatch(task_id):
        raise TaskError(
            "the directory name is the task's id: use letters, digits, '.', '_' and '-' "
            "(at most 100, not starting with a dot); rename it",
            source=label,
        )
    known = {TASK_FILE, FILES_DIR, TESTS_DIR, SOLUTION_DIR} | OPTIONAL_ENTRIES
    for entry in sorted(os.listdir(task_dir)):
        if entry not in known and entry not in SKIPPED_DIRS:
            raise TaskError(
                f"unexpected entry {entry!r}; a task directory holds only "
                f"{', '.join(sorted(known))} (move it into files/ or remove it)",
                source=label,
            )
    yaml_path = task_dir / TASK_FILE
    raw, _ = read_regular_file(yaml_path, str(yaml_path), MAX_TASK_YAML_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(
            f"not UTF-8 (byte {exc.start}); save it as UTF-8", source=str(yaml_path)
        ) from None
    config = parse_task_config(text, source=str(yaml_path))
    files, executable = read_tree(task_dir, FILES_DIR, required=False)
    tests, _ = read_tree(task_dir, TESTS_DIR, required=True)
    solution, solution_exec = read_tree(task_dir, SOLUTION_DIR, required=False)
    environment = None
    trees = {"files": files, "tests": tests, "solution": solution}
    if config.environment is not None:
        environment = config.environment.spec(task_dir, config.policy)
        trees[ENVIRONMENT_DIR], _ = read_tree(task_dir, ENVIRONMENT_DIR, required=False)
        if environment.dockerfile is not None and not environment.dockerfile.is_file():
            raise TaskError(
                f"environment.dockerfile {config.environment.dockerfile!r} is not a file in "
                "the task directory; add it or fix the path",
                source=str(yaml_path),
            )
    return Task(
        id=task_id,
        path=task_dir,
        config=config,
        files=files,
        tests=tests,
        solution=solution,
        executable=frozenset(executable),
        solution_executable=frozenset(solution_exec),
        digest=task_digest(raw, trees),
        environment=environment,
    )


def load_tasks(
    path: Path | str,
    *,
    loader: Callable[[Path | str], Task] = load_task,
    markers: tuple[str, ...] = (TASK_FILE,),
) -> list[Task]:
    """A task directory, or a directory of task directories (sorted by id).

    A task directory holds one of ``markers`` (``task.yaml``; the formats of
    :mod:`sandbox.evals.formats` add ``task.toml``) and is read by ``loader``.
    In a directory of tasks, hidden entries and plain files (a README) are
    skipped; every sub-directory must be a valid task.
    """
    root = Path(path)

    def marked(directory: Path | str) -> bool:
        return any(os.path.lexists(os.path.join(directory, m)) for m in markers)

    if marked(root):
        return [loader(root)]
    if not root.is_dir():
        raise TaskError(
            "no such directory; pass a task directory or a directory of them", source=str(root)
        )
    tasks: list[Task] = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name.startswith(".") or entry.name.startswith("_"):
            continue
        if entry.is_symlink():
            raise TaskError("is a symbolic link; task directories are plain", source=entry.path)
        if not entry.is_dir(follow_symlinks=False):
            continue
        if not marked(entry.path):
            raise TaskError(
                f"holds no {' or '.join(markers)}; every directory here must be a task (or "
                "start with '_' or '.' to be skipped)",
                source=entry.path,
            )
        tasks.append(loader(entry.path))
        if len(tasks) > MAX_TASKS:
            raise TaskError(f"holds more than {MAX_TASKS} tasks", source=str(root))
    if not tasks:
        raise TaskError(
            f"holds no task (a task is a directory with a {' or '.join(markers)})",
            source=str(root),
        )
    return tasks
