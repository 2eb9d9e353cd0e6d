"""A Harbor-layout task (Harbor, Terminal-Bench) made into our :class:`~sandbox.evals.tasks.Task`.

Harbor's containers know fixed paths: the agent works in the environment's
working directory (``/app`` by convention), the tests are uploaded to
``/tests`` and write their reward to ``/logs/verifier``. Loading rewrites
those absolute paths, wherever one stands as a whole path (``/app``,
``/app/out.txt``; not ``/apps`` or ``x/app``), in the text files it reads:

=====================  =================================  ==========================
Harbor path            in instruction.md, solve.sh        in tests/
=====================  =================================  ==========================
the working directory  a built environment: left alone    the same as for the agent
                       (its ``WORKDIR`` is writable and
                       filled from the image); a
                       Dockerfile mapped onto a built-in
                       image: ``/workspace``
``/tests``             (left alone)                       ``/judge/tests``
``/logs/verifier``     (left alone)                       ``/judge/logs/verifier``
                                                          (fresh, judge-only)
=====================  =================================  ==========================

``tests/test.sh`` runs with bash, as the judge uid (as root for a root agent or
``[verifier] user = "root"``: see :func:`_root_verifier`), from the working directory
(as Harbor runs it), with ``[verifier.env]`` exported and ``TEST_DIR`` set to
``/judge/tests``, once every process of the agent is gone, on the agent's own
workspace with ``agent-run`` to run the agent's programs as the sandbox uid
(``run_hidden_tests(agent_run=True)``, :mod:`sandbox.core.sessions`); its reward
file is the verdict (:mod:`sandbox.evals.reward_files`). A separate verifier with an
image of its own (:class:`SeparateVerifier`) runs the same way in a fresh session of
that image's environment, given the agent's ``artifacts`` (``Task.verifier_environment``,
:mod:`sandbox.evals.judging`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from sandbox.core.sessions import JUDGE_TESTS, JUDGE_VERIFIER
from sandbox.environments import EnvironmentSpec, ResourceRequest

from ..tasks import (
    BUILTIN_IMAGES,
    MAX_AGENT_TIMEOUT_S,
    MAX_INSTRUCTION_CHARS,
    MAX_TEST_TIMEOUT_S,
    AgentBudget,
    Task,
    TaskConfig,
    TaskError,
    TestSpec,
    task_digest,
)
from .dockerfile import DockerfileMapping

__all__ = [
    "EXIT_STATUS_REWARD",
    "HarborParts",
    "SeparateVerifier",
    "build_task",
    "path_pattern",
    "translate_paths",
    "verifier_command",
]

WORKSPACE: Final = "/workspace"
HARBOR_TESTS: Final = "/tests"
HARBOR_VERIFIER: Final = "/logs/verifier"
TEST_SCRIPT: Final = "test.sh"
POLICY: Final = "harbor"
ROOT_POLICY: Final = "harbor-gvisor"
"""The base policy of a root agent's environment and of root tests' (gVisor only)."""
"""The base policy of Harbor-layout tasks: long commands (a build, a test suite), as Harbor runs."""
AGENT_STEPS: Final = 1000
"""Harbor budgets the agent by time alone: its tasks get this many steps."""
EXIT_STATUS_REWARD: Final = """
_EXIT_CODE=$?
if [ $_EXIT_CODE -eq 0 ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
exit $_EXIT_CODE
"""
"""Appended to a test script whose exit status is the verdict (as Harbor's TB mapper does)."""
_PATH_CHARS: Final = r"[\w.\-/]"
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def path_pattern(path: str) -> re.Pattern[str]:
    """``path`` standing as a whole absolute path in text (``/app``, ``/app/x``; not ``/apps``)."""
    return re.compile(rf"(?<!{_PATH_CHARS}){re.escape(path)}(?=/|(?!{_PATH_CHARS}))")


def translate_paths(data: bytes, mapping: Mapping[str, str]) -> bytes:
    """``data`` with each whole absolute path of ``mapping`` replaced; binary data unchanged."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    for old, new in sorted(mapping.items(), key=lambda item: -len(item[0])):
        if old in ("", "/"):
            continue
        text = path_pattern(old).sub(new.replace("\\", "\\\\"), text)
    return text.encode("utf-8")


def verifier_command(env: Mapping[str, str], workdir: str = WORKSPACE) -> str:
    """The command that runs ``tests/test.sh`` from the working directory, ``env`` exported."""
    exports = " ".join(
        f"export {name}={shlex.quote(value)};"
        for name, value in {**env, "TEST_DIR": JUDGE_TESTS}.items()
    )
    return f"cd {shlex.quote(workdir)} && {exports} exec bash {JUDGE_TESTS}/{TEST_SCRIPT}"


@dataclass
class SeparateVerifier:
    """Harbor's separate verifier with an image of its own: ``tests/Dockerfile`` or an image."""

    dockerfile: Path | None
    image: str | None
    workdir: str | None
    """Where its tests run and the agent's artifacts go (Harbor's ``workdir``, else the
    Dockerfile's last ``WORKDIR``)."""
    resources: ResourceRequest
    env: dict[str, str] = field(default_factory=dict)
    build_timeout_s: float = 600.0


@dataclass
class HarborParts:
    """What a Harbor-layout task says, read and validated by its format's loader."""

    task_dir: Path
    format: Literal["harbor", "terminal-bench"]
    config_text: bytes
    instruction: str
    tests: dict[str, bytes]
    solve: bytes | None
    environment: DockerfileMapping | None
    """The Dockerfile read (None: the task names an image, ``image_name``)."""
    dockerfile: Path | None
    image_name: str | None
    workdir: str | None
    agent_timeout_s: float
    tests_timeout_s: float
    resources: ResourceRequest
    env: dict[str, str] = field(default_factory=dict)
    verifier_env: dict[str, str] = field(default_factory=dict)
    root: bool = False
    verifier_root: bool = False
    """``tests/test.sh`` runs as root (Harbor's ``[verifier] user = "root"``)."""
    build_timeout_s: float = 600.0
    context_exclude: tuple[str, ...] = ()
    """Top-level entries of the build context never built into the image."""
    verifier: SeparateVerifier | None = None
    """None: the tests run in the agent's own session once its processes are gone."""
    artifacts: list[str] = field(default_factory=list)
    """What a separate verifier gets of the agent's work (Harbor's ``artifacts``)."""
    category: str = "uncategorized"
    difficulty: Literal["easy", "medium", "hard"] | None = None
    tags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _timeout(value: float, limit: float, what: str, source: str, key: str) -> float:
    if not 0 < value <= limit:
        raise TaskError(
            f"{what} must be above 0 and at most {limit:g} s (got {value:g}); change it",
            source=source,
            key=key,
        )
    return value


def _root_verifier(
    parts: HarborParts, spec: EnvironmentSpec, workdir: str
) -> tuple[EnvironmentSpec, tuple[str, ...]]:
    """Where the tests of a root agent, or root tests, run: never in the agent's session
    (root there could have changed anything, the runner included) but in a fresh root
    session of the same environment, given the agent's working directory."""
    artifacts = tuple(dict.fromkeys((workdir, WORKSPACE)))
    parts.notes.append(
        "the tests run as root in a fresh session of the environment, given the agent's "
        f"{' and '.join(artifacts)}; what the agent changed elsewhere (installed packages, "
        "/etc) is not carried over"
    )
    return spec.model_copy(update={"root": True, "base_policy": ROOT_POLICY}), artifacts


def _separate(
    parts: HarborParts, agent_paths: Mapping[str, str], source: str
) -> tuple[EnvironmentSpec | None, tuple[str, ...], str]:
    """A separate verifier's environment, the artifacts it gets and where its tests run.

    Paths are the agent's as translated (``/app`` is ``/workspace`` on a built-in image);
    an artifact goes to the same path in the verifier's session, which must be its
    working directory or ``/workspace``.
    """
    verifier = parts.verifier
    if verifier is None:
        return None, (), WORKSPACE

    def translated(path: str) -> str:
        return translate_paths(path.encode(), agent_paths).decode().rstrip("/") or "/"

    workdir = translated(verifier.workdir) if verifier.workdir not in (None, "/") else WORKSPACE
    artifacts = tuple(dict.fromkeys(translated(path) for path in parts.artifacts))
    for artifact in artifacts:
        if artifact not in (WORKSPACE, workdir):
            raise TaskError(
                f"artifact {artifact!r}: the separate verifier gets the agent's work in its own "
                f"working directory ({workdir}) or {WORKSPACE}; give its image WORKDIR "
                f"{artifact} (or [verifier.environment] workdir)",
                source=source,
                key="artifacts",
            )
    where: dict[str, object] = (
        {"dockerfile": verifier.dockerfile, "context": verifier.dockerfile.parent}
        if verifier.dockerfile is not None
        else {"image": verifier.image}
    )
    parts.notes.append(
        "the tests run in a separate verifier session of their own environment "
        f"({verifier.dockerfile or verifier.image}), given the agent's "
        + (", ".join(artifacts) if artifacts else "nothing (no artifacts declared)")
    )
    spec = EnvironmentSpec.model_validate(
        {
            **where,
            "resources": verifier.resources,
            "base_policy": POLICY,
            "build_timeout_s": verifier.build_timeout_s,
            "env": verifier.env,
        }
    )
    return spec, artifacts, workdir


def build_task(parts: HarborParts, *, source: str) -> Task:
    """The :class:`Task` of ``parts``: its paths translated, its environment set."""
    for section, values in (("environment.env", parts.env), ("verifier.env", parts.verifier_env)):
        for name in values:
            if not _ENV_NAME.fullmatch(name):
                raise TaskError(
                    "not a variable name (letters, digits and '_', not starting with a digit); "
                    "rename it",
                    source=source,
                    key=f"{section}.{name}",
                )
    workdir = parts.workdir if parts.workdir not in (None, "/") else None
    mapped = parts.environment
    on_builtin = (mapped is not None and mapped.image is not None) or (
        mapped is None and parts.image_name in BUILTIN_IMAGES
    )
    # A built environment keeps its WORKDIR (writable, filled from the image): no rewrite.
    agent_paths = {workdir: WORKSPACE} if workdir and on_builtin else {}
    test_paths = {HARBOR_TESTS: JUDGE_TESTS, HARBOR_VERIFIER: JUDGE_VERIFIER, **agent_paths}
    if workdir is None:
        parts.notes.append("no working directory: absolute paths in its files are left as they are")
    instruction = translate_paths(parts.instruction.encode(), agent_paths).decode()
    tests = {path: translate_paths(data, test_paths) for path, data in parts.tests.items()}
    solution = {"solve.sh": translate_paths(parts.solve, agent_paths)} if parts.solve else {}

    files: dict[str, bytes] = {}
    executable: set[str] = set()
    source_of: dict[str, object]
    if mapped is not None and mapped.image is not None:
        builtin: str | None = mapped.image
        files, executable = mapped.files, mapped.executable
        source_of = {"image": mapped.base}
    elif mapped is not None:
        builtin = None
        parts.notes.append(f"its environment needs building: {mapped.unmapped}")
        assert parts.dockerfile is not None
        source_of = {
            "dockerfile": parts.dockerfile,
            "context": parts.dockerfile.parent,
            "exclude": parts.context_exclude,
        }
    else:
        assert parts.image_name is not None
        builtin = BUILTIN_IMAGES.get(parts.image_name)
        source_of = {"image": parts.image_name}
        if builtin is None:
            parts.notes.append(f"image {parts.image_name!r} runs only through image aliases")
    spec = EnvironmentSpec.model_validate(
        {
            **source_of,
            "resources": parts.resources,
            "base_policy": ROOT_POLICY if parts.root else POLICY,
            "root": parts.root,
            "build_timeout_s": parts.build_timeout_s,
            "env": {**(mapped.env if mapped is not None else {}), **parts.env},
        }
    )
    verifier, artifacts, tests_workdir = _separate(parts, agent_paths, source)
    root_tests = parts.root or parts.verifier_root
    if verifier is None:
        tests_workdir = WORKSPACE if on_builtin or workdir is None else workdir
        if root_tests:
            verifier, artifacts = _root_verifier(parts, spec, tests_workdir)
    elif root_tests:
        verifier = verifier.model_copy(update={"root": True, "base_policy": ROOT_POLICY})
    image: Literal["python", "polyglot"] = "polyglot" if builtin == "polyglot" else "python"
    if len(instruction) > MAX_INSTRUCTION_CHARS:
        raise TaskError(
            f"the instruction is {len(instruction)} characters; at most {MAX_INSTRUCTION_CHARS}",
            source=str(parts.task_dir),
        )
    config = TaskConfig(
        instruction=instruction,
        image=image,
        policy=POLICY,
        agent=AgentBudget(
            timeout_s=_timeout(
                parts.agent_timeout_s, MAX_AGENT_TIMEOUT_S, "the agent's timeout", source, "agent"
            ),
            max_steps=AGENT_STEPS,
        ),
        tests=TestSpec(
            command=verifier_command(parts.verifier_env, tests_workdir),
            timeout_s=_timeout(
                parts.tests_timeout_s, MAX_TEST_TIMEOUT_S, "the tests' timeout", source, "verifier"
            ),
        ),
        category=parts.category[:64] or "uncategorized",
        difficulty=parts.difficulty,
        tags=[t[:64] for t in parts.tags if t][:32],
    )
    trees: dict[str, Mapping[str, bytes]] = {"tests": parts.tests, "environment": files}
    if parts.solve:
        trees["solution"] = {"solve.sh": parts.solve}
    return Task(
        id=parts.task_dir.resolve().name,
        path=parts.task_dir,
        config=config,
        files=files,
        tests=tests,
        solution=solution,
        executable=frozenset(executable),
        digest=task_digest(parts.config_text + parts.instruction.encode(), trees),
        environment=spec,
        verifier_environment=verifier,
        artifacts=artifacts,
        format=parts.format,
        judged_by_reward=True,
        notes=tuple(parts.notes),
    )
