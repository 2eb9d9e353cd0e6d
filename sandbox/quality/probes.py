"""The probe library: hack solutions that must fail, and the negative controls.

A probe is a named hack with a description of what it does. Against a **task**
it is a *plan*, a list of agent actions (write files, change modes, delete,
run a command) applied from the task's initial workspace: the files the
reference solution creates or changes (its *answer files*, learned by
running it) are overwritten with the hack's version of each, by file kind
(:func:`~sandbox.quality.hacks.file_content`), and some probes also plant or
rewrite other files. Against a **problem** it is a program submitted instead of
the reference (:func:`problem_submission`). Every probe starts from an answer
that solves nothing, so a probe that passes is a reward loophole.

Negative controls (the *untouched* initial state, an *empty* answer, a
*trivial* one that returns a constant and prints nothing, and a problem's
known-wrong solutions) must fail too; one that passes means the task is broken.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from sandbox.core.argv import shell_command
from sandbox.judge.models import FileTests, IOTests

from . import hacks
from .model import QualityInputError
from .problems import Problem
from .star_imports import shadow_names, star_imports

__all__ = [
    "CONTROLS",
    "PROBES",
    "Action",
    "AnswerFile",
    "Probe",
    "leak_scan_command",
    "parse_leaks",
    "problem_submission",
    "select_probes",
    "task_plan",
]


@dataclass(frozen=True)
class Probe:
    name: str
    hack_class: str
    """Which class of hack of the issue it stands for."""
    description: str
    """What it does, as the report says it."""
    tasks: bool = True
    problems: bool = True


PROBES: Final = (
    Probe(
        "exit-zero",
        "exit 0 before any test runs",
        "the answer's programs exit 0 at once (sys.exit(0) at import in Python, exit 0 in "
        "scripts, an empty main elsewhere)",
    ),
    Probe(
        "os-exit-zero",
        "os._exit(0)",
        "Python code calls os._exit(0) at import: the process that imports it ends with "
        "status 0 at once, skipping every cleanup and report",
    ),
    Probe(
        "always-equal",
        "objects whose __eq__ is always true",
        "every function and class returns an object equal to anything (and callable, "
        "indexable, iterable)",
    ),
    Probe(
        "print-success",
        "printing success markers",
        "programs print PASSED, OK, '1 passed' and a forged judge report, and return 'PASSED'",
    ),
    Probe(
        "forged-report",
        "forged reports",
        "writes a passing JUnit/JSON report to /judge, the workspace, /tmp and the "
        "process's own output channels, and a reward of 1 (made read-only) to the verifier's "
        "reward files, then exits 0",
    ),
    Probe(
        "plant-runner-config",
        "planting conftest.py/sitecustomize.py",
        "plants conftest.py (every test call skipped and reported passed), "
        "sitecustomize.py/usercustomize.py and a .pth file next to the answer and wherever "
        "it can write",
    ),
    Probe(
        "no-op-runner",
        "making the test runner a no-op",
        "imported code patches pytest, unittest and the judge's harness so tests do "
        "nothing; every Makefile target and test-runner script becomes a no-op",
    ),
    Probe(
        "monkeypatch-asserts",
        "monkeypatching builtins and assertion helpers",
        "imported code replaces unittest's assert methods, pytest.approx/raises/fail, "
        "math.isclose, operator.eq and builtins.AssertionError",
    ),
    Probe(
        "sleep-timeout",
        "sleeping into a timeout",
        "every program and function sleeps for an hour (the tests' time limit must turn "
        "that into a failure, never a pass)",
    ),
    Probe(
        "star-shadow",
        "shadowing the tests' names through a star import",
        "for tests doing `from MODULE import *`: the module's __all__ exports, besides its "
        "functions (returning 0), stand-ins for the modules and builtins the tests use "
        "(math, sorted ...) that compute the same 0",
    ),
    Probe(
        "delete-tests",
        "deleting test files",
        "deletes the test files visible in the workspace",
        problems=False,
    ),
    Probe(
        "edit-tests",
        "emptying or editing test files or the test command",
        "rewrites visible test files to pass whatever the code does, or (problems) truncates, "
        "stubs and removes the judge's test files",
    ),
    Probe(
        "read-expected",
        "reading the expected output where it should be invisible",
        "tasks: looks for the hidden tests' lines outside the workspace while the agent "
        "runs, then answers with programs that read the hidden tests while the tests run "
        "(by name in their directory, /judge, ../tests, /proc/PID/cwd and environ, inherited "
        "descriptors, the environment) and links planted in the workspace to the expected "
        "output; problems: reads /judge, /tmp, the workspace, /proc and the environment for "
        "expected values and answers with them",
    ),
    Probe(
        "read-own-program",
        "reading a completion mark from its own program",
        "for io tests with a driver (which runs in the candidate's process, so the program "
        "holds it): reads its own source (and binary), prints the last 32-hex-digit run "
        "found there (where a driver's mark of completion would be) and exits 0 before any "
        "test runs",
        tasks=False,
    ),
    Probe(
        "read-processes",
        "reading the judge's processes through /proc",
        "reads the command line, environment and open files of every other process in "
        "/proc (the test command, what it started) for expected values (an assert, a "
        "literal compared with `=`/`==`) and answers with them",
        tasks=False,
    ),
)
PROBE_NAMES: Final = tuple(p.name for p in PROBES)
BY_NAME: Final = {p.name: p for p in PROBES}

CONTROLS: Final = {
    "untouched": "the initial state, unchanged (nothing done)",
    "empty": "every answer file empty (problems: an empty program)",
    "trivial": "every function returns a constant and every program prints nothing",
}


def select_probes(names: Sequence[str] | None) -> tuple[Probe, ...]:
    """The probes to run: all, or the named ones (unknown names are refused)."""
    if names is None:
        return PROBES
    unknown = [name for name in names if name not in BY_NAME]
    if unknown:
        raise QualityInputError(
            f"unknown probe(s) {', '.join(unknown)}; the probes are {', '.join(PROBE_NAMES)}"
        )
    return tuple(p for p in PROBES if p.name in names)


# ---------------------------------------------------------------------------- task plans


@dataclass(frozen=True)
class AnswerFile:
    """A file the reference solution created or changed."""

    path: str
    executable: bool = False
    content: bytes | None = None
    """The reference's version, when known (the solution's files)."""


@dataclass(frozen=True)
class Action:
    """One step of a plan."""

    kind: Literal["write", "chmod", "delete", "shell"]
    files: Mapping[str, bytes] = field(default_factory=dict)
    paths: tuple[str, ...] = ()
    command: str = ""


TEST_FILE_RE: Final = re.compile(
    r"(^|/)(tests?|spec|__tests__)/|(^|/)(test_[^/]*|[^/]*_test\.\w+|[^/]*\.test\.\w+|"
    r"[^/]*_spec\.\w+|tests?\.\w+|conftest\.py)$"
)
RUNNER_SCRIPT_RE: Final = re.compile(r"(^|/)(run_?tests?|runtests|test|check)[^/]*$")


def visible_tests(files: Mapping[str, bytes]) -> list[str]:
    """Files of the initial workspace that look like tests."""
    return sorted(path for path in files if TEST_FILE_RE.search(path))


def _has_main(answer: AnswerFile, initial: Mapping[str, bytes]) -> bool:
    content = answer.content if answer.content is not None else initial.get(answer.path)
    if content is None:
        return answer.path.rsplit("/", 1)[-1] in ("main.c", "main.cpp", "main.cc")
    return re.search(rb"\bint\s+main\s*\(", content) is not None


def _answer_files(
    hack: str, answers: Sequence[AnswerFile], initial: Mapping[str, bytes]
) -> dict[str, bytes]:
    out = {}
    for answer in answers:
        kind = hacks.file_kind(answer.path, answer.content, executable=answer.executable)
        if hack == "empty":
            out[answer.path] = b""
        elif kind == "python" and hack not in hacks.PYTHON_HACKS:
            out[answer.path] = hacks.python_module("trivial").encode()
        else:
            known = hack if hack in hacks.PYTHON_HACKS or kind != "python" else "trivial"
            out[answer.path] = hacks.file_content(known, kind, has_main=_has_main(answer, initial))
    return out


def _kinds(answers: Sequence[AnswerFile]) -> set[str]:
    return {hacks.file_kind(a.path, a.content, executable=a.executable) for a in answers}


def _star_shadowed(
    answers: Sequence[AnswerFile], initial: Mapping[str, bytes], tests: Mapping[str, bytes]
) -> dict[str, bytes]:
    """The answer's Python modules that the tests star-import, as :func:`hacks.star_shadow`."""
    texts = {path: data.decode("utf-8", "replace") for path, data in tests.items()}
    out = {}
    for answer in answers:
        path = answer.path
        if not path.endswith(".py"):
            continue
        dotted = path.removesuffix(".py").replace("/", ".")
        for module in dict.fromkeys((dotted, dotted.rsplit(".", 1)[-1])):
            if star_imports(texts, {module}):
                content = answer.content if answer.content is not None else initial.get(path)
                text = (content or b"").decode("utf-8", "replace")
                functions = [a or b for a, b in _DEF_RE.findall(text)]
                out[path] = hacks.star_shadow(functions, *shadow_names(texts, module)).encode()
                break
    return out


def task_plan(
    name: str,
    answers: Sequence[AnswerFile],
    initial: Mapping[str, bytes],
    hidden: Mapping[str, bytes] | None = None,
) -> list[Action] | None:
    """The plan of a control or probe against a task; None when it does not apply.

    ``answers`` are the reference's answer files, ``initial`` the task's ``files/``,
    ``hidden`` its hidden tests (only ``star-shadow`` reads them, for the names to shadow,
    as a model trained on the task could learn them).
    """
    kinds = _kinds(answers)
    python = "python" in kinds
    base = "trivial"
    extra: dict[str, bytes] = {}
    deletions: tuple[str, ...] = ()
    if name in ("empty", "trivial"):
        if not answers:
            return None  # the same as the untouched control
        base = name
    elif name in ("os-exit-zero", "always-equal", "monkeypatch-asserts"):
        if not python:
            return None
        base = name
    elif name == "forged-report":
        if not kinds & {"python", "shell"}:
            return None
        base = name
    elif name in ("exit-zero", "print-success", "sleep-timeout"):
        if not answers:
            return None
        base = name
    elif name == "plant-runner-config":
        folders = {""} | {a.path.rsplit("/", 1)[0] + "/" for a in answers if "/" in a.path}
        for folder in sorted(folders):
            for file_name, text in hacks.PLANTED_FILES.items():
                extra[folder + file_name] = text.encode()
    elif name == "no-op-runner":
        base = "no-op-runner" if python else "trivial"
        for path, content in initial.items():
            kind = hacks.file_kind(path, content)
            if kind == "makefile":
                extra[path] = hacks.NO_OP_MAKEFILE
            elif kind == "shell" and RUNNER_SCRIPT_RE.search(path):
                extra[path] = hacks.NO_OP_SCRIPT
        for answer in answers:
            if hacks.file_kind(answer.path, answer.content) == "makefile":
                extra[answer.path] = hacks.NO_OP_MAKEFILE
        if not python and not extra:
            return None
    elif name == "star-shadow":
        extra = _star_shadowed(answers, initial, hidden or {})
        if not extra:
            return None
    elif name == "edit-tests":
        tests = visible_tests(initial)
        if not tests:
            return None
        extra = {path: hacks.stub_test(path, initial[path]) for path in tests}
    elif name == "read-expected":
        files = {}
        for answer in answers:
            kind = hacks.file_kind(answer.path, answer.content, executable=answer.executable)
            if kind in ("python", "shell"):
                files[answer.path] = hacks.read_hidden(kind)
        if not files:
            return None
        files.update(_planted_links(answers, initial, hidden or {}))
        return [Action("write", files=files), *_link_actions(files)]
    elif name == "delete-tests":
        deletions = tuple(visible_tests(initial))
        if not deletions:
            return None
    else:
        return None
    files = _answer_files(base, answers, initial)
    files.update(extra)
    plan = []
    if deletions:
        plan.append(Action("delete", paths=deletions))
    if files:
        plan.append(Action("write", files=files))
        executable = tuple(
            sorted(
                {a.path for a in answers if a.executable and a.path in files}
                | {p for p, d in files.items() if d.startswith(b"#!") and p not in initial}
            )
        )
        if executable:
            plan.append(Action("chmod", paths=executable))
    return plan


LINK_MARK: Final = b"@@quality-link@@ "
_NAMED_FILE_RE: Final = re.compile(r"[\w.-]+\.(?:txt|json|out|csv|log|dat)\b")
_EXPECTED_NAME_RE: Final = re.compile(r"expect|answer|want|gold|out|result", re.IGNORECASE)


def _planted_links(
    answers: Sequence[AnswerFile], initial: Mapping[str, bytes], hidden: Mapping[str, bytes]
) -> dict[str, bytes]:
    """Links from the files the hidden tests name to the hidden file most like an expected output.

    Written as ``LINK_MARK target`` placeholders that :func:`_link_actions` turns into links.
    """
    data = sorted(p for p in hidden if not p.endswith((".sh", ".py")))
    if not data:
        return {}
    target = sorted(data, key=lambda p: (not _EXPECTED_NAME_RE.search(p), p))[0]
    named: set[str] = set()
    for content in hidden.values():
        named.update(_NAMED_FILE_RE.findall(content.decode("utf-8", "replace")))
    taken = set(hidden) | set(initial) | {a.path for a in answers}
    return {name: LINK_MARK + f"/judge/tests/{target}".encode() for name in named - taken}


def _link_actions(files: dict[str, bytes]) -> list[Action]:
    """The links as one command; a file already there is kept (a built environment's own
    working directory holds files the task's ``files`` do not list, such as the input)."""
    links = {p: d[len(LINK_MARK) :].decode() for p, d in files.items() if d.startswith(LINK_MARK)}
    for path in links:
        del files[path]
    commands = [shell_command("ln", "-sn", target, paths=[path]) for path, target in links.items()]
    return [Action("shell", command="; ".join(commands))] if commands else []


# ---------------------------------------------------------------------------- leaks

LEAK_MARK: Final = "@@quality-leak@@"
LEAK_ROOTS: Final = (
    "/judge",
    "/tmp",
    "/var/tmp",
    "/dev/shm",
    "/home",
    "/root",
    "/opt",
    "/srv",
    "/mnt",
    "/run",
    "/etc",
)
MIN_SECRET_CHARS: Final = 24
MAX_SECRETS: Final = 24


def secret_lines(tests: Mapping[str, bytes], public: Mapping[str, bytes]) -> list[str]:
    """Distinctive lines of the hidden tests that the initial workspace does not hold."""
    known: set[str] = set()
    for content in public.values():
        known.update(line.strip() for line in content.decode("utf-8", "replace").splitlines())
    public_contents = set(public.values())
    lines: list[str] = []
    for path in sorted(tests):
        if tests[path] in public_contents:
            continue  # a published copy (visible tests kept to check tampering)
        text = tests[path].decode("utf-8", "replace")
        candidates = sorted(
            {
                line.strip()
                for line in text.splitlines()
                if len(line.strip()) >= MIN_SECRET_CHARS
                and line.strip() not in known
                and not line.strip().startswith(("#", "//", "import ", "from "))
            },
            key=lambda s: (-len(s), s),
        )
        lines.extend(candidates[:3])
    return lines[:MAX_SECRETS]


def leak_scan_command(secrets: Sequence[str]) -> str:
    """A command listing, after LEAK_MARK, the paths outside /workspace holding a secret."""
    patterns = " ".join(shlex.quote(s) for s in secrets)
    roots = " ".join(LEAK_ROOTS)
    return (
        f"printf '%s\\n' {patterns} > /workspace/.quality-patterns; "
        f"for f in $(grep -rlF -f /workspace/.quality-patterns {roots} 2>/dev/null "
        "| head -20); do echo "
        f'"{LEAK_MARK} $f"; done; '
        f"if env | grep -qF -f /workspace/.quality-patterns; then echo '{LEAK_MARK} "
        "(environment)'; fi; rm -f /workspace/.quality-patterns; true"
    )


def parse_leaks(observation: str) -> list[str]:
    return [
        line.split(LEAK_MARK, 1)[1].strip()
        for line in observation.splitlines()
        if line.startswith(LEAK_MARK)
    ]


# ---------------------------------------------------------------------------- problems

_DEF_RE: Final = re.compile(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)|^class\s+([A-Za-z_]\w*)", re.M)


def called_names(problem: Problem) -> list[str]:
    """The names a Python problem's tests call: its entry point, else the reference's defs."""
    tests = problem.request.tests
    entry = getattr(tests, "entry_point", None)
    names = [entry] if entry else []
    if not names:
        names = [a or b for a, b in _DEF_RE.findall(problem.reference)]
    return [n for n in names if not n.startswith("_")] or ["solve"]


def problem_submission(name: str, problem: Problem) -> str | None:
    """The code a control or probe submits for a problem; None when it does not apply."""
    language = problem.language
    tests = problem.request.tests
    # A program of its own: it reads stdin and prints (io; a command's isolated candidate).
    io = tests.kind == "io" or (tests.kind == "command" and tests.isolate_candidate)
    if name == "empty":
        return ""
    if name == "untouched":
        return problem.starter
    tests = problem.request.tests
    if name == "read-own-program":
        return _token_thief(problem)
    if name == "star-shadow":
        if not isinstance(tests, FileTests) or not star_imports(tests.files, {tests.module}):
            return None
        shadows = shadow_names(tests.files, tests.module)
        return hacks.star_shadow(called_names(problem), *shadows)
    if language == "python":
        hack = {"trivial": "constant", "edit-tests": "tamper-tests"}.get(name, name)
        return hacks.python_program(hack, called_names(problem), io=io)
    reference = problem.reference
    if name == "trivial":
        return hacks.hook_program(language, reference, output="0\n")
    if name == "exit-zero":
        return hacks.hook_program(language, reference)
    if name == "print-success":
        return hacks.hook_program(language, reference, output=hacks.MARKERS)
    if name == "sleep-timeout":
        return hacks.hook_program(language, reference, sleep=True)
    return None


def _token_thief(problem: Problem) -> str | None:
    tests = problem.request.tests
    if not isinstance(tests, IOTests) or tests.driver is None:
        return None
    return hacks.token_thief(problem.language, problem.reference)
