"""Hidden tests, verdicts and rewards an RL trainer can trust.

Four kinds of tests, all run inside one leased sandbox per submission:

- ``io``: stdin to expected stdout. The program runs once per case; the
  expected output never enters the container and is compared here, by the
  trusted side (exact, trailing-whitespace, token-wise or float-tolerant).
  A ``driver`` appended to the candidate's code (a ``main`` calling its
  function and printing the result) makes function-style tests in any language.
- ``function`` (Python): an entry point, argument lists and expected values.
  The candidate runs in its own process as the sandbox uid; a harness running
  as the judge uid calls it across a socket and reports the *plain values* it
  returned; they are compared here. Objects with a rigged ``__eq__`` cannot
  cross the boundary as values.
- ``assert`` (Python: HumanEval's ``check(candidate)``, MBPP asserts): the test
  script runs in the judge process against stand-ins of the candidate, each
  assert-bearing statement a test. Other languages are refused: appended to
  the candidate's source, the tests (and any proof of completion) would be
  readable from inside the candidate's own process.
- ``files`` (Python): hidden pytest files run in the judge process, with the
  candidate's module imported through the same boundary.
- ``command`` (any language): hidden test files and a command (``go test
  -json``, ``node --test``, ``pytest --junitxml``, a script printing TAP) run as
  the judge uid on a copy of the candidate's workspace in ``/judge``; the
  per-test results are read here from the report the command wrote (JUnit XML,
  ``go test -json`` or TAP), with size caps. See :meth:`Judge._command` for
  what that does and does not guarantee.

A pass needs positive evidence written after the last test: the judge's
report with ``"complete": true`` (or matching outputs), never the candidate's exit
status or what it printed. An infrastructure failure gives reward ``None`` and
``error_class: "infra"``, never 0.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from . import metrics
from .audit import code_hash
from .backends.base import WORKDIR, Sandbox
from .errors import InfrastructureError, InvalidRequestError, SandboxTimeoutError
from .execution import (
    BASE_ENV,
    MAX_CODE_BYTES,
    ExecutionService,
    build,
    check_relative_path,
    compile_timeout_note,
    exec_limits,
    sandbox_env,
)
from .languages import Language, get_language
from .policy import LimitOverrides, Policy
from .results import ExecLimits, ExecResult, ExecStatus
from .runner.harness import wire

logger = logging.getLogger(__name__)

HARNESS_DIR = "/opt/sandbox/runner/harness"
JUDGE_DIR = "/judge"
CANDIDATE_FILE = "solution.py"
MAX_CASES = 10_000
MAX_TEST_FILES = 64
DEFAULT_TEST_TIMEOUT_S = 5.0
LOAD_TIMEOUT_S = 10.0
MESSAGE_CHARS = 500
COMPILE_OUTPUT_CHARS = 8000
# ``command`` tests: where they run (the judge's copy of the candidate's workspace),
# where their files wait while it is made, and what a report may be.
COMMAND_DIR = f"{JUDGE_DIR}/run"
STAGING = "staged-tests"
COMMAND_STAGING = f"{JUDGE_DIR}/{STAGING}"
COMMAND_SETUP_ISOLATED = (
    f"rm -rf {COMMAND_DIR} && mkdir -m 0700 {COMMAND_DIR} && "
    f"cp -R {COMMAND_STAGING}/. {COMMAND_DIR}/ && rm -rf {COMMAND_STAGING}"
)
RUN_CANDIDATE = f"python3 -I {HARNESS_DIR}/run_candidate.py"
COMMAND_SETUP = (
    f"rm -rf {COMMAND_DIR} && "
    f"python3 -I {HARNESS_DIR}/workspace_copy.py {WORKDIR} {COMMAND_DIR} && "
    f"cp -R {COMMAND_STAGING}/. {COMMAND_DIR}/ && rm -rf {COMMAND_STAGING}"
)
REPORT_FORMATS = ("junit", "go-json", "tap")
MAX_REPORT_BYTES = 4 << 20
MAX_LINE_CHARS = 4096
# The judge's own output has caps of its own, never the candidate's: its report
# (stdout: every case with the value it returned) and its log (stderr: pytest's
# summary of each failure) grow with the tests, not with what the candidate printed.
# A policy's higher caps still apply.
JUDGE_REPORT_BYTES = 32 << 20
JUDGE_LOG_BYTES = 4 << 20
MAX_COMMAND_ARGS = 256
MAX_COMMAND_CHARS = 64 * 1024


class TestVerdict(StrEnum):
    """What happened to one test."""

    PASSED = "passed"
    WRONG_ANSWER = "wrong_answer"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    COMPILE_ERROR = "compile_error"
    # ``command`` tests: no usable report (missing, garbled, incomplete, empty, or
    # contradicting the command's exit status): never a pass.
    REPORT_ERROR = "report_error"
    SKIPPED = "skipped"
    INFRA_ERROR = "infra_error"


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IOCase(_Wire):
    """One stdin/expected-stdout pair."""

    stdin: str = ""
    expected_stdout: str
    weight: float = Field(default=1.0, gt=0)
    name: str | None = None


class IOTests(_Wire):
    kind: Literal["io"] = "io"
    cases: list[IOCase] = Field(min_length=1, max_length=MAX_CASES)
    driver: str | None = Field(
        default=None,
        max_length=MAX_CODE_BYTES,
        description="Code appended to the candidate's (e.g. a main() that reads arguments "
        "from stdin, calls the candidate's function and prints the result): function-style "
        "tests for any language, with the expected outputs kept outside the container.",
    )
    compare: Literal["exact", "rstrip", "tokens", "float"] = "rstrip"
    float_rel_tol: float = Field(default=1e-6, ge=0)
    float_abs_tol: float = Field(default=1e-9, ge=0)


class FunctionCase(_Wire):
    """Arguments for one call and the value it must return (JSON, or wire-tagged values)."""

    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None
    weight: float = Field(default=1.0, gt=0)
    name: str | None = None


class FunctionTests(_Wire):
    kind: Literal["function"] = "function"
    entry_point: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    cases: list[FunctionCase] = Field(min_length=1, max_length=MAX_CASES)
    float_rel_tol: float = Field(default=1e-6, ge=0)
    float_abs_tol: float = Field(default=1e-9, ge=0)


class AssertTests(_Wire):
    kind: Literal["assert"] = "assert"
    script: str = Field(max_length=MAX_CODE_BYTES)
    entry_point: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    prelude: str | None = Field(
        default=None,
        max_length=MAX_CODE_BYTES,
        description="Trusted code run in the judge before the tests (e.g. HumanEval's prompt).",
    )


class FileTests(_Wire):
    kind: Literal["files"] = "files"
    files: dict[str, str] = Field(min_length=1, max_length=MAX_TEST_FILES)
    module: str = Field(default="solution", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_command(value: list[str] | str | None, what: str) -> list[str] | str | None:
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"{what} is an empty string; give an argv list or a shell command")
        if len(value) > MAX_COMMAND_CHARS or "\x00" in value:
            raise ValueError(f"{what} must be at most {MAX_COMMAND_CHARS} characters, no NUL")
        return value
    if not value or not value[0].strip():
        raise ValueError(f'{what} is empty; give an argv list such as ["go", "test", "-json"]')
    if len(value) > MAX_COMMAND_ARGS or sum(map(len, value)) > MAX_COMMAND_CHARS:
        raise ValueError(f"{what} has more than {MAX_COMMAND_ARGS} arguments or characters")
    if any("\x00" in arg for arg in value):
        raise ValueError(f"{what} must not contain NUL")
    return value


class CommandTests(_Wire):
    """Hidden test files and the command (any test runner) running them: ``Judge._command``."""

    kind: Literal["command"] = "command"
    files: dict[str, str] = Field(min_length=1, max_length=MAX_TEST_FILES)
    command: list[str] | str = Field(
        description="argv, or a string run with `bash -c`, in the directory holding the "
        "candidate's file and the test files."
    )
    report: Literal["junit", "go-json", "tap"] = Field(
        description="The report's format: JUnit XML, `go test -json` events, or TAP."
    )
    report_path: str | None = Field(
        default=None,
        description="Where the command writes its report, relative to its directory; "
        "without it the report is the command's stdout.",
    )
    build: list[str] | str | None = Field(
        default=None,
        description="Run first, under the compile limits; failing is a compile_error.",
    )
    timeout_s: float | None = Field(
        default=None, gt=0, description="For the whole command; at most the wall limit."
    )
    isolate_candidate: bool = Field(
        default=False,
        description="Run the candidate as a program of its own, as the sandbox uid: the "
        "command never runs its code, but calls `$RUN_CANDIDATE [ARGS...]` (stdin in, "
        "stdout out, exit status) for each run; see Judge._command.",
    )
    expected_tests: list[str] | None = Field(
        default=None,
        max_length=MAX_CASES,
        description="Names the report must hold; one missing is a runtime_error. Set it for "
        "runners that count a test file exiting 0 as a pass (node --test).",
    )

    @field_validator("command")
    @classmethod
    def _command_given(cls, value: list[str] | str) -> list[str] | str:
        checked = _check_command(value, "command")
        assert checked is not None
        return checked

    @field_validator("build")
    @classmethod
    def _build_given(cls, value: list[str] | str | None) -> list[str] | str | None:
        return _check_command(value, "build")


Tests = Annotated[
    IOTests | FunctionTests | AssertTests | FileTests | CommandTests, Field(discriminator="kind")
]


class JudgeRequest(_Wire):
    """One submission and its hidden tests."""

    id: str | None = Field(default=None, max_length=256)
    language: str = "python"
    code: str = Field(max_length=MAX_CODE_BYTES)
    tests: Tests
    policy: str = "default"
    limits: LimitOverrides | None = None
    test_timeout_s: float | None = Field(
        default=None, gt=0, description="Per test (per case or call); at most the wall limit."
    )
    reward: Literal["binary", "fraction", "weighted"] = "binary"
    early_stop: bool = Field(default=False, description="Stop at the first failing test.")


class TestResult(BaseModel):
    name: str
    verdict: TestVerdict
    time_s: float | None = None
    weight: float = 1.0
    message: str | None = None


class JudgeResult(BaseModel):
    """The verdict on one submission."""

    id: str | None = None
    passed: int
    total: int
    reward: float | None
    error_class: str | None = Field(
        description="None when every test passed; else compile_error, infra, or the first "
        "failed test's verdict."
    )
    tests: list[TestResult]
    compile_output: str | None = None
    message: str | None = None
    duration_s: float = 0.0

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total


# ------------------------------------------------------------------------ comparisons


def compare_output(actual: str, expected: str, tests: IOTests) -> bool:
    """The trusted comparison of a program's stdout with the expected one."""
    if tests.compare == "exact":
        return actual == expected
    if tests.compare == "rstrip":
        return _rstrip_lines(actual) == _rstrip_lines(expected)
    got, want = actual.split(), expected.split()
    if tests.compare == "tokens":
        return got == want
    return len(got) == len(want) and all(
        _same_token(a, b, tests.float_rel_tol, tests.float_abs_tol)
        for a, b in zip(got, want, strict=True)
    )


def _rstrip_lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(inf|nan)", re.IGNORECASE)


def _same_token(actual: str, expected: str, rel: float, abs_: float) -> bool:
    if actual == expected:
        return True
    if _NUMBER.fullmatch(actual) and _NUMBER.fullmatch(expected):
        return math.isclose(float(actual), float(expected), rel_tol=rel, abs_tol=abs_)
    return False


def from_json(value: Any) -> Any:
    """A test value given in JSON: plain JSON, with wire tags (``{"$tuple": [...]}``) allowed.

    Raises :class:`InvalidRequestError` for a malformed tag.
    """
    if isinstance(value, list):
        return [from_json(item) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and next(iter(value)).startswith("$"):
        ((tag, body),) = value.items()
        try:
            if tag in ("$tuple", "$set", "$frozenset") and isinstance(body, list):
                items = [from_json(item) for item in body]
                return {"$tuple": tuple, "$set": set, "$frozenset": frozenset}[tag](items)
            if tag == "$dict" and isinstance(body, list):
                return {from_json(k): from_json(v) for k, v in body}
            return wire.decode(value)
        except (wire.WireError, TypeError, ValueError) as exc:
            raise InvalidRequestError(f"bad test value {str(value)[:80]}: {exc}") from None
    return {key: from_json(item) for key, item in value.items()}


def same_value(actual: Any, expected: Any, rel: float, abs_: float) -> bool:
    """Equality of plain values: floats within tolerance, lists and tuples interchangeable
    (JSON has no tuples), bools never equal to numbers."""
    if type(actual) is bool or type(expected) is bool:
        return type(actual) is type(expected) and actual == expected
    numbers = (int, float)
    if type(actual) in numbers and type(expected) in numbers:
        if type(actual) is int and type(expected) is int:
            return bool(actual == expected)
        try:
            got, want = float(actual), float(expected)
        except OverflowError:  # an int too large for any float cannot be close to one
            return False
        if math.isnan(got) or math.isnan(want):
            return math.isnan(got) and math.isnan(want)
        return math.isclose(got, want, rel_tol=rel, abs_tol=abs_)
    sequences = (list, tuple)
    if type(actual) in sequences and type(expected) in sequences:
        return len(actual) == len(expected) and all(
            same_value(a, e, rel, abs_) for a, e in zip(actual, expected, strict=True)
        )
    if type(actual) is dict and type(expected) is dict:
        return actual.keys() == expected.keys() and all(
            same_value(actual[k], expected[k], rel, abs_) for k in expected
        )
    return type(actual) is type(expected) and bool(actual == expected)


# ------------------------------------------------------------------------ scoring


def score(
    request: JudgeRequest,
    tests: list[TestResult],
    *,
    compile_output: str | None = None,
    message: str | None = None,
    started: float,
) -> JudgeResult:
    """passed/total, reward under the requested shape, and the error class."""
    if request.early_stop:
        tests = _stop_after_first_failure(tests)
    counted = [t for t in tests if t.verdict is not TestVerdict.SKIPPED or request.early_stop]
    passed = sum(1 for t in counted if t.verdict is TestVerdict.PASSED)
    total = len(counted)
    failures = [t for t in counted if t.verdict is not TestVerdict.PASSED]
    infra = any(t.verdict is TestVerdict.INFRA_ERROR for t in counted)
    reward: float | None
    error_class: str | None
    if infra:
        reward, error_class = None, "infra"
    else:
        error_class = failures[0].verdict.value if failures else None
        if request.reward == "binary":
            reward = 1.0 if total and passed == total else 0.0
        elif request.reward == "fraction":
            reward = passed / total if total else 0.0
        else:
            weight = sum(t.weight for t in counted)
            reward = sum(t.weight for t in counted if t.verdict is TestVerdict.PASSED) / weight
    return JudgeResult(
        id=request.id,
        passed=passed,
        total=total,
        reward=reward,
        error_class=error_class,
        tests=tests,
        compile_output=compile_output,
        message=message,
        duration_s=round(time.perf_counter() - started, 6),
    )


def _stop_after_first_failure(tests: list[TestResult]) -> list[TestResult]:
    """With early stop, nothing after the first failure counts as passed (function cases
    are compared here, after they all ran)."""
    out: list[TestResult] = []
    failed = False
    for test in tests:
        if failed and test.verdict is TestVerdict.PASSED:
            test = test.model_copy(update={"verdict": TestVerdict.SKIPPED, "message": "not run"})
        failed = failed or test.verdict not in (TestVerdict.PASSED, TestVerdict.SKIPPED)
        out.append(test)
    return out


def unjudged(
    request: JudgeRequest, message: str, started: float, error_class: str = "infra"
) -> JudgeResult:
    """No verdict about the code (the platform failed, or time ran out): no reward, never 0."""
    return JudgeResult(
        id=request.id,
        passed=0,
        total=0,
        reward=None,
        error_class=error_class,
        tests=[],
        message=message,
        duration_s=round(time.perf_counter() - started, 6),
    )


_STATUS_VERDICT = {
    ExecStatus.TIMEOUT: TestVerdict.TIMEOUT,
    ExecStatus.MEMORY_LIMIT: TestVerdict.MEMORY_LIMIT,
    ExecStatus.OUTPUT_LIMIT: TestVerdict.OUTPUT_LIMIT,
    ExecStatus.NONZERO_EXIT: TestVerdict.RUNTIME_ERROR,
    ExecStatus.SIGNAL: TestVerdict.RUNTIME_ERROR,
}


def judge_limits(limits: ExecLimits, report_bytes: int = JUDGE_REPORT_BYTES) -> ExecLimits:
    """``limits`` for a process of the judge: its report and log capped on their own."""
    return limits.model_copy(
        update={
            "stdout_bytes": max(limits.stdout_bytes, report_bytes),
            "stderr_bytes": max(limits.stderr_bytes, JUDGE_LOG_BYTES),
        }
    )


def _short(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")[-MESSAGE_CHARS:]


def _compile_output(failure: ExecResult, limits: ExecLimits) -> str:
    """A failed build's output; one stopped by its time limit says so first."""
    stderr, note = failure.stderr, b""
    if failure.status is ExecStatus.TIMEOUT:
        note = compile_timeout_note(limits)
        stderr = stderr.removesuffix(note)  # build() ends its stderr with the note
    return note.decode() + _head_and_tail(stderr + failure.stdout)


def _head_and_tail(data: bytes) -> str:
    """A compiler's output, kept whole when short, else its start (the first error) and end."""
    text = data.decode("utf-8", errors="replace")
    if len(text) <= COMPILE_OUTPUT_CHARS:
        return text
    head, tail = COMPILE_OUTPUT_CHARS * 3 // 4, COMPILE_OUTPUT_CHARS // 4
    return f"{text[:head]}\n[... {len(text) - head - tail} characters ...]\n{text[-tail:]}"


# ------------------------------------------------------------------------ the judge


class Judge:
    """Runs submissions against their hidden tests, on the execution service's pool."""

    def __init__(self, execution: ExecutionService) -> None:
        self.execution = execution
        self.pool = execution.pool

    def plan(self, request: JudgeRequest) -> tuple[Language, Policy, ExecLimits, float, str]:
        """Validate a request before anything runs: language, policy, limits, image."""
        language = get_language(request.language)
        kind = request.tests.kind
        if kind not in ("io", "command") and language.name != "python":
            raise InvalidRequestError(
                f"{kind} tests are for Python, where the tests run in a process the candidate "
                f"cannot reach; for {language.name} use io tests, with a `driver` that calls "
                "the candidate's function and prints what it returned, or command tests"
            )
        if isinstance(request.tests, CommandTests):
            self._check_command_paths(request.tests, language)
        if kind == "files":
            for path in request.tests.files:  # type: ignore[union-attr]
                check_relative_path(path)
        if isinstance(request.tests, FunctionTests):
            for case in request.tests.cases:
                from_json(case.args)
                from_json(case.kwargs)
                from_json(case.expected)
        policy = self.execution.policy(request.policy)
        limits = exec_limits(policy, request.limits)
        test_timeout = min(request.test_timeout_s or DEFAULT_TEST_TIMEOUT_S, limits.wall_s)
        image = self.execution.resolve_image(
            "python" if language.name == "python" else language.image
        )
        return language, policy, limits, test_timeout, image

    @staticmethod
    def _check_command_paths(tests: CommandTests, language: Language) -> None:
        directories = {
            "/".join(parts[:i])
            for parts in (path.split("/") for path in tests.files)
            for i in range(1, len(parts))
        }
        for path in tests.files:
            check_relative_path(path)
            if path == language.source_file or path.split("/")[0] == language.source_file:
                raise InvalidRequestError(
                    f"test file {path!r} would replace the candidate's code "
                    f"({language.source_file!r} in {language.name}); rename it"
                )
            if path in directories:
                raise InvalidRequestError(f"test file {path!r} is also a directory of another")
        if tests.report_path is not None:
            check_relative_path(tests.report_path)
            if tests.report_path in tests.files or tests.report_path == language.source_file:
                raise InvalidRequestError(
                    f"report_path {tests.report_path!r} names a file given before the run; "
                    "the report must be written by the command"
                )

    async def judge(self, request: JudgeRequest, *, tenant: str) -> JudgeResult:
        """Judge one submission; infrastructure failures come back as reward None."""
        started = time.perf_counter()
        language, policy, limits, test_timeout, image = self.plan(request)
        try:
            async with self.pool.lease(image, policy, tenant) as lease:
                result = await self._run(
                    lease.sandbox, request, language, policy, limits, test_timeout, started
                )
                if result.error_class == "infra":
                    lease.retire(result.message or "infrastructure error")
        except (InfrastructureError, SandboxTimeoutError) as exc:
            logger.warning("judging failed for infrastructure reasons: %s", exc)
            result = unjudged(request, str(exc), started)
        metrics.record_judgement(language.name, policy.name, result.error_class)
        if self.execution.audit is not None:
            self.execution.audit.record(
                tenant=tenant,
                kind="judge",
                policy=policy.name,
                image=image,
                language=language.name,
                code_sha256=code_hash(request.code),
                verdict=result.error_class or "passed",
                duration_s=result.duration_s,
                detail=f"{result.passed}/{result.total} reward={result.reward}",
            )
        return result

    async def _run(
        self,
        sandbox: Sandbox,
        request: JudgeRequest,
        language: Language,
        policy: Policy,
        limits: ExecLimits,
        test_timeout: float,
        started: float,
    ) -> JudgeResult:
        env = {**sandbox_env(policy, {}), **language.env}
        tests = request.tests
        if isinstance(tests, IOTests):
            return await self._io(
                sandbox, request, tests, language, limits, env, test_timeout, started
            )
        if isinstance(tests, CommandTests):
            return await self._command(
                sandbox, request, tests, language, limits, env, test_timeout, started
            )
        return await self._pair(sandbox, request, limits, env, test_timeout, started)

    async def _compile(
        self,
        sandbox: Sandbox,
        language: Language,
        source: str,
        limits: ExecLimits,
        env: dict[str, str],
    ) -> ExecResult | None:
        """Build the source; the compiler's result when it failed, else None."""
        result = await build(
            sandbox, language, {language.source_file: source.encode()}, limits, env
        )
        return None if result.status is ExecStatus.OK else result

    async def _io(
        self,
        sandbox: Sandbox,
        request: JudgeRequest,
        tests: IOTests,
        language: Language,
        limits: ExecLimits,
        env: dict[str, str],
        test_timeout: float,
        started: float,
    ) -> JudgeResult:
        names = [case.name or f"case {i}" for i, case in enumerate(tests.cases)]
        source = request.code if tests.driver is None else f"{request.code}\n{tests.driver}\n"
        if language.compiled:
            failure = await self._compile(sandbox, language, source, limits, env)
            if failure is not None:
                return self._compile_error(request, names, tests, failure, limits, started)
        case_limits = limits.model_copy(update={"wall_s": test_timeout})
        results: list[TestResult] = []
        files: dict[str, bytes] | None = (
            None if language.compiled else {language.source_file: source.encode()}
        )
        for index, case in enumerate(tests.cases):
            if request.early_stop and results and results[-1].verdict is not TestVerdict.PASSED:
                results.append(
                    TestResult(name=names[index], verdict=TestVerdict.SKIPPED, weight=case.weight)
                )
                continue
            run = await sandbox.exec(
                list(language.run),
                limits=case_limits,
                stdin=case.stdin.encode(),
                env=env,
                files=files,
            )
            files = None  # written once; the same files serve every case
            results.append(self._io_verdict(names[index], case, run, tests))
        return score(request, results, started=started)

    @staticmethod
    def _io_verdict(name: str, case: IOCase, run: ExecResult, tests: IOTests) -> TestResult:
        time_s = run.usage.wall_s
        if run.status is ExecStatus.OK:
            actual = run.stdout.decode("utf-8", errors="replace")
            if compare_output(actual, case.expected_stdout, tests):
                return TestResult(
                    name=name, verdict=TestVerdict.PASSED, time_s=time_s, weight=case.weight
                )
            return TestResult(
                name=name,
                verdict=TestVerdict.WRONG_ANSWER,
                time_s=time_s,
                weight=case.weight,
                message=f"got {actual[:200]!r}",
            )
        verdict = _STATUS_VERDICT.get(run.status, TestVerdict.RUNTIME_ERROR)
        return TestResult(
            name=name,
            verdict=verdict,
            time_s=time_s,
            weight=case.weight,
            message=_short(run.stderr) or run.reason,
        )

    def _compile_error(
        self,
        request: JudgeRequest,
        names: list[str],
        tests: IOTests,
        failure: ExecResult,
        limits: ExecLimits,
        started: float,
    ) -> JudgeResult:
        results = [
            TestResult(name=name, verdict=TestVerdict.COMPILE_ERROR, weight=case.weight)
            for name, case in zip(names, tests.cases, strict=True)
        ]
        output = _compile_output(failure, limits)
        return score(request, results, compile_output=output, started=started)

    async def _command(
        self,
        sandbox: Sandbox,
        request: JudgeRequest,
        tests: CommandTests,
        language: Language,
        limits: ExecLimits,
        env: dict[str, str],
        test_timeout: float,
        started: float,
    ) -> JudgeResult:
        """Hidden test files and a command, run as the judge uid on a copy of the candidate's work.

        1. The candidate's code is written to ``/workspace`` as the sandbox uid.
        2. As the judge uid, the workspace is copied to ``/judge/run`` (mode 0700, the
           candidate's uid cannot read it) by ``runner/harness/workspace_copy.py`` (links
           leading out of the copy dropped), and the hidden test files are put in it.
        3. ``build``, if given, runs there as the judge uid under the compile limits;
           failing is a ``compile_error``.
        4. The command runs there as the judge uid, within ``timeout_s``. Its report (stdout,
           or ``report_path``, removed first and read back by the runner, as root and
           without following links, once every process of the run is dead) is parsed
           here, by the service, never by code in the container, and capped in size.

        A pass needs the command to exit 0 *and* a complete report (a JUnit file whose
        counts add up, ``go test -json`` events ending each package, a TAP stream whose
        plan matches its test points) listing at least one test that ran, none failed.
        Anything else (no report, a garbled or truncated one, a timeout, a report that
        says "all passed" from a command that exited 1) fails with ``report_error`` or
        the run's own verdict; a ``go test`` build failure is a ``compile_error``.

        What this guarantees, and what it does not: the tests are never readable by
        the candidate's uid, and nothing the candidate leaves in its workspace is taken
        for a report. But the command runs the candidate's code *as the judge uid*: a
        runner that loads the candidate into its own process (``go test``, ``node
        --test``, pytest importing it) can be made to write a forged report, and any
        candidate code the command runs, in-process or as a program it starts, can read
        the hidden test files while it runs. The report is evidence from the test
        runner, not proof against code written to attack that runner; use ``io`` (or
        Python's ``function``/``assert``/``files``) tests where that matters, or:

        With ``isolate_candidate`` the candidate's code is never run by the judge's
        command. It is built (compiled languages) as the sandbox uid in ``/workspace``
        (failing is a ``compile_error``); ``/judge/run`` holds only the test files;
        and the command runs with a peer, ``runner/harness/program_server.py``, as the
        sandbox uid, which runs the candidate's program (the language's run command
        plus arguments) each time the command calls ``$RUN_CANDIDATE`` (that is,
        ``runner/harness/run_candidate.py``), ``test_timeout_s`` per run. The
        candidate then cannot read the tests, signal or trace the test processes, or
        write the report: what it prints is data the tests check. The command must
        keep it that way (never echo the program's output as report lines).
        """
        judge_env = {
            **env,
            "HOME": JUDGE_DIR,
            "TMPDIR": JUDGE_DIR,
            "USER": "judge",
            "LOGNAME": "judge",
        }
        for name in ("GOCACHE", "GOPATH"):  # the toolchain's caches, the judge's own
            if name in judge_env:
                judge_env[name] = f"{JUDGE_DIR}/.{name.lower()}"
        code = {language.source_file: request.code.encode()}
        isolated = tests.isolate_candidate
        if isolated and language.compiled:  # built where it runs: by and as the candidate
            failure = await self._compile(sandbox, language, request.code, limits, env)
            if failure is not None:
                output = _compile_output(failure, limits)
                return _command_failure(
                    request, TestVerdict.COMPILE_ERROR, "the build failed", started, output
                )
        else:
            written = await sandbox.exec(["true"], limits=limits, env=env, files=code)
            if written.status is not ExecStatus.OK:
                message = f"could not write the candidate's code: {written.reason}"
                return unjudged(request, message, started)
        staged = {f"{STAGING}/{path}": text.encode() for path, text in tests.files.items()}
        setup = await sandbox.exec(
            ["bash", "-c", COMMAND_SETUP_ISOLATED if isolated else COMMAND_SETUP],
            limits=limits,
            cwd=JUDGE_DIR,
            env=judge_env,
            files=staged,
            role="judge",
        )
        if setup.status is not ExecStatus.OK:
            return unjudged(
                request, f"could not prepare the judge's copy: {_short(setup.stderr)}", started
            )
        if tests.build is not None:
            compile_limits = limits.model_copy(
                update={"wall_s": limits.compile_s, "cpu_s": limits.compile_s, "memory_bytes": None}
            )
            built = await sandbox.exec(
                _argv(tests.build),
                limits=compile_limits,
                cwd=COMMAND_DIR,
                env=judge_env,
                role="judge",
            )
            if built.status is not ExecStatus.OK:
                output = _head_and_tail(built.stderr + built.stdout)
                if built.status is ExecStatus.TIMEOUT:
                    output = (
                        f"the build exceeded its time limit of {limits.compile_s:g} s\n{output}"
                    )
                return _command_failure(
                    request, TestVerdict.COMPILE_ERROR, "the build failed", started, output
                )
        timeout = min(tests.timeout_s or limits.wall_s, limits.wall_s)
        argv = _argv(tests.command)
        if tests.report_path is not None:  # whatever is there was not written by this run
            argv = ["bash", "-c", 'rm -f -- "$0" && exec "$@"', tests.report_path, *argv]
        peer: dict[str, Any] | None = None
        if isolated:
            judge_env["RUN_CANDIDATE"] = RUN_CANDIDATE
            server = ["python3", "-I", f"{HARNESS_DIR}/program_server.py"]
            peer = {
                "argv": [*server, json.dumps(list(language.run)), str(test_timeout)],
                "cwd": WORKDIR,
                "env": env,
                "files": {},
            }
        run = await sandbox.exec(
            argv,
            limits=judge_limits(limits, MAX_REPORT_BYTES).model_copy(
                update={"wall_s": timeout, "cpu_s": min(limits.cpu_s, timeout)}
            ),
            cwd=COMMAND_DIR,
            env=judge_env,
            fetch=[tests.report_path] if tests.report_path is not None else (),
            role="judge",
            peer=peer,
        )
        return self._from_command(request, tests, run, started)

    @staticmethod
    def _from_command(
        request: JudgeRequest, tests: CommandTests, run: ExecResult, started: float
    ) -> JudgeResult:
        """The verdict from a command's run and report, decided here."""
        output = _short(run.stderr).strip()
        if run.status not in (ExecStatus.OK, ExecStatus.NONZERO_EXIT):
            verdict = _STATUS_VERDICT.get(run.status, TestVerdict.RUNTIME_ERROR)
            why = f"the test command ended with {run.status.value} ({run.reason or run.signal})"
            return _command_failure(request, verdict, f"{why}: {output}".strip(": "), started)
        where = "its stdout" if tests.report_path is None else tests.report_path
        data = run.stdout if tests.report_path is None else run.files.get(tests.report_path)
        if data is None:
            error = run.file_errors.get(str(tests.report_path), "not found")
            return _command_failure(
                request,
                TestVerdict.REPORT_ERROR,
                f"no report at {where} ({error}); the command exited {run.exit_code}: {output}",
                started,
            )
        parsed = parse_report(tests.report, data)
        if parsed.build_failed:
            return _command_failure(
                request,
                TestVerdict.COMPILE_ERROR,
                "the tests did not build",
                started,
                _head_and_tail(run.stderr + run.stdout),
            )
        problem = parsed.problem
        ran = [t for t in parsed.tests if t.verdict is not TestVerdict.SKIPPED]
        if problem is None and not parsed.tests:
            problem = "it lists no test"
        elif problem is None and not ran:
            problem = f"every test in it ({len(parsed.tests)}) was skipped"
        elif (
            problem is None
            and run.exit_code != 0
            and all(t.verdict is TestVerdict.PASSED for t in ran)
        ):
            problem = f"the command exited {run.exit_code} although it shows no failure"
        if problem is not None:
            return _command_failure(
                request,
                TestVerdict.REPORT_ERROR,
                f"the {tests.report} report in {where} is not usable: {problem}"
                + (f"; the command exited {run.exit_code}: {output}" if run.exit_code else ""),
                started,
            )
        results = _against_expected(parsed.tests, tests.expected_tests)
        message = None if run.exit_code == 0 else f"the test command exited {run.exit_code}"
        return score(request, results, message=message, started=started)

    async def _pair(
        self,
        sandbox: Sandbox,
        request: JudgeRequest,
        limits: ExecLimits,
        env: dict[str, str],
        test_timeout: float,
        started: float,
    ) -> JudgeResult:
        """Python function/assert/files tests: judge process + candidate process."""
        tests = request.tests
        spec: dict[str, Any] = {
            "call_timeout_s": test_timeout,
            "load_timeout_s": LOAD_TIMEOUT_S,
            "early_stop": request.early_stop,
        }
        judge_files: dict[str, bytes] = {}
        if isinstance(tests, FunctionTests):
            program = "judge_function.py"
            spec["entry_point"] = tests.entry_point
            spec["cases"] = [
                {
                    "args": [wire.encode(from_json(a)) for a in case.args],
                    "kwargs": {k: wire.encode(from_json(v)) for k, v in case.kwargs.items()},
                }
                for case in tests.cases
            ]
        elif isinstance(tests, AssertTests):
            program = "judge_assert.py"
            judge_files["test.py"] = tests.script.encode()
            spec |= {"test": f"{JUDGE_DIR}/test.py", "entry_point": tests.entry_point}
            if tests.prelude is not None:
                judge_files["prelude.py"] = tests.prelude.encode()
                spec["prelude"] = f"{JUDGE_DIR}/prelude.py"
        else:
            assert isinstance(tests, FileTests)
            program = "judge_pytest.py"
            for path, text in tests.files.items():
                judge_files[f"tests/{path}"] = text.encode()
            spec |= {"tests_dir": f"{JUDGE_DIR}/tests", "module": tests.module}
        judge_files["spec.json"] = json.dumps(spec).encode()
        module = tests.module if isinstance(tests, FileTests) else "solution"
        run = await sandbox.exec(
            ["python3", f"{HARNESS_DIR}/{program}", f"{JUDGE_DIR}/spec.json"],
            limits=judge_limits(limits),
            cwd=JUDGE_DIR,
            env={**BASE_ENV, "HOME": JUDGE_DIR, "TMPDIR": JUDGE_DIR},
            files=judge_files,
            peer={
                "argv": [
                    "python3",
                    f"{HARNESS_DIR}/candidate.py",
                    f"{WORKDIR}/{CANDIDATE_FILE}",
                    module,
                ],
                "cwd": WORKDIR,
                "env": env,
                "files": {CANDIDATE_FILE: request.code.encode()},
            },
        )
        return self._from_report(request, tests, run, started)

    def _from_report(
        self, request: JudgeRequest, tests: Any, run: ExecResult, started: float
    ) -> JudgeResult:
        report = _parse_report(run.stdout)
        peer = run.peer or {}
        crash = _crash_verdict(run, peer)
        if report is None:
            # No evidence: the judge never finished (killed for time, memory or output).
            verdict = _STATUS_VERDICT.get(run.status, TestVerdict.RUNTIME_ERROR)
            names = self._expected_names(tests, None)
            return score(
                request,
                [TestResult(name=n, verdict=verdict, weight=w) for n, w in names],
                message=_short(run.stderr) or run.reason or "the judge produced no report",
                started=started,
            )
        if not report.get("loaded"):
            error = report.get("load_error") or {}
            names = self._expected_names(tests, report)
            message = f"the candidate failed to load: {error.get('type')}: {error.get('message')}"
            return score(
                request,
                [TestResult(name=n, verdict=crash, weight=w, message=message) for n, w in names],
                message=message,
                started=started,
            )
        results = [self._test_result(entry, tests, crash) for entry in report["tests"]]
        if isinstance(tests, FunctionTests):
            results = [
                self._check_value(result, entry.get("returned"), tests)
                for result, entry in zip(results, report["tests"], strict=True)
            ]
        seen = {r.name for r in results}
        for name, weight in self._expected_names(tests, report):
            if name not in seen:
                results.append(
                    TestResult(
                        name=name,
                        verdict=TestVerdict.RUNTIME_ERROR,
                        weight=weight,
                        message="not reached",
                    )
                )
        if not results:
            results = [
                TestResult(name="tests", verdict=TestVerdict.RUNTIME_ERROR, message="no test ran")
            ]
        return score(request, results, started=started)

    @staticmethod
    def _expected_names(tests: Any, report: dict[str, Any] | None) -> list[tuple[str, float]]:
        if isinstance(tests, FunctionTests):
            return [(f"case {i}", c.weight) for i, c in enumerate(tests.cases)]
        if report is not None and report.get("expected"):
            return [(str(name), 1.0) for name in report["expected"]]
        if isinstance(tests, AssertTests):
            return [("assert script", 1.0)]
        return [("test files", 1.0)]

    @staticmethod
    def _test_result(entry: dict[str, Any], tests: Any, crash: TestVerdict) -> TestResult:
        verdict_text = str(entry.get("verdict"))
        if verdict_text == "crashed":
            verdict = crash
        else:
            try:
                verdict = TestVerdict(verdict_text)
            except ValueError:
                verdict = TestVerdict.RUNTIME_ERROR
        weight = 1.0
        if isinstance(tests, FunctionTests):
            index = int(str(entry.get("name", "case 0")).split()[-1])
            weight = tests.cases[index].weight if index < len(tests.cases) else 1.0
        return TestResult(
            name=str(entry.get("name")),
            verdict=verdict,
            time_s=entry.get("time_s"),
            weight=weight,
            message=entry.get("message"),
        )

    @staticmethod
    def _check_value(result: TestResult, returned: Any, tests: FunctionTests) -> TestResult:
        """Compare what a call returned with the expected value, here on the trusted side."""
        if result.verdict is not TestVerdict.PASSED:
            return result
        index = int(result.name.split()[-1])
        case = tests.cases[index]
        try:
            actual = wire.decode(returned)
        except (wire.WireError, TypeError, ValueError):
            return result.model_copy(
                update={
                    "verdict": TestVerdict.WRONG_ANSWER,
                    "message": "returned something that is not plain data",
                }
            )
        expected = from_json(case.expected)
        if same_value(actual, expected, tests.float_rel_tol, tests.float_abs_tol):
            return result
        return result.model_copy(
            update={"verdict": TestVerdict.WRONG_ANSWER, "message": f"returned {actual!r}"[:200]}
        )


def _parse_report(stdout: bytes) -> dict[str, Any] | None:
    """The judge's report, only if it is complete: the evidence a pass needs."""
    try:
        report = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(report, dict) or report.get("complete") is not True:
        return None
    if not isinstance(report.get("tests"), list):
        return None
    return report


def _crash_verdict(run: ExecResult, peer: dict[str, Any]) -> TestVerdict:
    """Why the candidate's process stopped answering, from what the kernel reported."""
    if run.oom_killed:
        return TestVerdict.MEMORY_LIMIT
    return TestVerdict.RUNTIME_ERROR


# ------------------------------------------------------------------------ command reports


def _argv(command: list[str] | str) -> list[str]:
    return ["bash", "-c", command] if isinstance(command, str) else list(command)


def _command_failure(
    request: JudgeRequest,
    verdict: TestVerdict,
    message: str,
    started: float,
    compile_output: str | None = None,
) -> JudgeResult:
    """A command run that gave no per-test evidence: one failed entry, reward 0."""
    message = message[-MESSAGE_CHARS * 2 :]
    return score(
        request,
        [TestResult(name="command", verdict=verdict, message=message)],
        compile_output=compile_output,
        message=message,
        started=started,
    )


def _against_expected(tests: list[TestResult], expected: list[str] | None) -> list[TestResult]:
    """With ``expected``, exactly those tests earn credit, in that order: one the report
    lacks is a runtime error, one it holds twice takes its worse entry; any other test
    in the report can only fail the submission (a passing one is left out)."""
    if expected is None:
        return tests
    by_name: dict[str, TestResult] = {}
    for test in tests:
        earlier = by_name.get(test.name)
        if earlier is None or earlier.verdict is TestVerdict.PASSED:
            by_name[test.name] = test
    results = [
        by_name.get(name)
        or TestResult(name=name, verdict=TestVerdict.RUNTIME_ERROR, message="not in the report")
        for name in dict.fromkeys(expected)
    ]
    wanted = set(expected)
    results += [t for t in tests if t.name not in wanted and t.verdict is not TestVerdict.PASSED]
    return results


@dataclass
class ParsedReport:
    """Per-test results read from a report, or why the report cannot be used."""

    tests: list[TestResult] = field(default_factory=list)
    problem: str | None = None
    build_failed: bool = False


def parse_report(report_format: str, data: bytes) -> ParsedReport:
    """Read a test runner's report (``junit``, ``go-json`` or ``tap``) on the trusted side.

    Bounded: at most :data:`MAX_REPORT_BYTES` and :data:`MAX_CASES` tests; XML with a
    DTD or entities is refused before parsing. ``problem`` says why a report is not
    complete evidence (garbled, truncated, counts that do not add up).
    """
    if len(data) > MAX_REPORT_BYTES:
        return ParsedReport(problem=f"it is larger than {MAX_REPORT_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ParsedReport(problem="it is not UTF-8")
    if report_format == "junit":
        parsed = _parse_junit(text)
    elif report_format == "go-json":
        parsed = _parse_go_json(text)
    else:
        parsed = _parse_tap(text)
    if len(parsed.tests) > MAX_CASES:
        return ParsedReport(problem=f"it lists more than {MAX_CASES} tests")
    return parsed


def _parse_junit(text: str) -> ParsedReport:
    if re.search(r"<!(DOCTYPE|ENTITY)", text, re.IGNORECASE):
        return ParsedReport(problem="JUnit reports with a DTD or entities are refused")
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        return ParsedReport(problem=f"it is not well-formed XML ({exc})")
    if root.tag not in ("testsuites", "testsuite"):
        return ParsedReport(problem=f"its root is <{root.tag}>, not <testsuites> or <testsuite>")
    problem = _junit_counts(root)
    if problem is not None:
        return ParsedReport(problem=problem)
    cases = list(root.iter("testcase"))
    if len(cases) > MAX_CASES:
        return ParsedReport(problem=f"it lists more than {MAX_CASES} tests")
    results = []
    for case in cases:
        name = case.get("name") or "?"
        classname = case.get("classname")
        verdict, message = TestVerdict.PASSED, None
        for tag, outcome in (
            ("failure", TestVerdict.WRONG_ANSWER),
            ("error", TestVerdict.RUNTIME_ERROR),
            ("skipped", TestVerdict.SKIPPED),
        ):
            found = case.find(tag)
            if found is not None:
                verdict = outcome
                message = (found.get("message") or found.text or tag)[:MESSAGE_CHARS]
                break
        results.append(
            TestResult(
                name=f"{classname}::{name}" if classname else name,
                verdict=verdict,
                time_s=_float(case.get("time")),
                message=message,
            )
        )
    return ParsedReport(tests=results)


def _junit_counts(root: ElementTree.Element) -> str | None:
    """Whether every suite holds as many test cases (its own and its nested suites')
    as its ``tests`` attribute says. Iterative: a report nested 100,000 deep is fine."""
    suites = [e for e in root.iter() if e.tag in ("testsuites", "testsuite")]
    counts: dict[int, int] = {}
    for suite in reversed(suites):  # nested suites before the suites holding them
        count = sum(
            1 if child.tag == "testcase" else counts.get(id(child), 0)
            for child in suite
            if child.tag in ("testcase", "testsuite")
        )
        counts[id(suite)] = count
        declared = suite.get("tests")
        if declared is not None and declared.strip() != str(count):
            return (
                f"<{suite.tag} name={suite.get('name', '')[:80]!r}> declares "
                f"tests={declared[:20]!r} but holds {count} test cases (an incomplete report)"
            )
    return None


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


_GO_BUILD_FAILED = re.compile(r"^FAIL\s.*\[(build|setup) failed\]\s*$")


def _parse_go_json(text: str) -> ParsedReport:
    """``go test -json``: top-level tests (subtests count through their parent), and
    a final pass/fail/skip event for every package, or the run did not finish."""
    order: list[tuple[str, str]] = []
    outcome: dict[tuple[str, str], tuple[str, float | None]] = {}
    output: dict[tuple[str, str], str] = {}
    packages: list[str] = []
    finished: set[str] = set()
    seen: set[tuple[str, str]] = set()
    build_failed = False
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:  # go test prints build failures as text, not events
            build_failed = build_failed or bool(_GO_BUILD_FAILED.match(line[:MAX_LINE_CHARS]))
            continue
        if not isinstance(event, dict):
            return ParsedReport(problem=f"a line is not an event: {line[:80]!r}")
        package, test, action = event.get("Package"), event.get("Test"), event.get("Action")
        if not isinstance(package, str) or not isinstance(action, str):
            return ParsedReport(problem=f"an event without Package or Action: {line[:80]!r}")
        if test is not None and not isinstance(test, str):
            return ParsedReport(problem=f"an event whose Test is not a name: {line[:80]!r}")
        if package not in packages:
            packages.append(package)
        if test is None:
            if action in ("pass", "fail", "skip"):
                finished.add(package)
            elif action == "output" and "[build failed]" in str(event.get("Output")):
                build_failed = True
            continue
        key = (package, test.split("/")[0])
        if key not in seen:
            seen.add(key)
            order.append(key)
            if len(order) > MAX_CASES:
                return ParsedReport(problem=f"it lists more than {MAX_CASES} tests")
        if action == "output" and len(output.get(key, "")) < 4 * MESSAGE_CHARS:
            output[key] = output.get(key, "") + str(event.get("Output"))
        elif action in ("pass", "fail", "skip") and "/" not in test:
            outcome[key] = (action, _float(event.get("Elapsed")))
    if build_failed and not order:
        return ParsedReport(build_failed=True)
    if not packages:
        return ParsedReport(problem="it holds no go test events")
    unfinished = [p for p in packages if p not in finished]
    if unfinished:
        return ParsedReport(problem=f"package {unfinished[0]} has no final event (cut short)")
    several = len(packages) > 1
    results = []
    for key in order:
        package, test = key
        action, elapsed = outcome.get(key, ("", None))
        text_out = output.get(key, "")
        if action == "pass":
            verdict, message = TestVerdict.PASSED, None
        elif action == "skip":
            verdict, message = TestVerdict.SKIPPED, None
        elif action == "fail":
            panicked = "panic:" in text_out
            verdict = TestVerdict.RUNTIME_ERROR if panicked else TestVerdict.WRONG_ANSWER
            message = text_out[-MESSAGE_CHARS:]
        else:
            verdict, message = (
                TestVerdict.RUNTIME_ERROR,
                "no outcome: the test binary stopped in it",
            )
        name = f"{package}.{test}" if several else test
        results.append(TestResult(name=name, verdict=verdict, time_s=elapsed, message=message))
    return ParsedReport(tests=results)


_TAP_PLAN = re.compile(r"^1\.\.(\d+)\s*(#.*)?$")
_TAP_POINT = re.compile(r"^(not )?ok\b(?:\s+(\d+))?\s*(?:-\s*)?(.*)$")
_TAP_DIRECTIVE = re.compile(r"^(.*?)\s*(?<!\\)#\s*(skip|todo)\b.*$", re.IGNORECASE)


def _parse_tap(text: str) -> ParsedReport:
    """TAP (12/13/14): the top-level test points (indented subtests count through their
    parent), exactly one plan ``1..N`` matching them, numbers 1..N in order if given,
    no ``Bail out!``. ``# SKIP`` and ``# TODO`` are skipped."""
    results: list[TestResult] = []
    plans: list[int] = []
    numbers: list[int | None] = []
    detail: list[str] = []
    collecting = False  # in the indented block right after a failed test point
    for whole in text.splitlines():
        line = whole[:MAX_LINE_CHARS]  # bounded work per line for the regular expressions
        if line[:1].isspace():  # subtests, and the YAML block after a test point
            if collecting:
                detail.append(line.strip())
            continue
        collecting = False
        if detail:
            _tap_detail(results, detail)
        if line.startswith("Bail out!"):
            return ParsedReport(problem=f"the run bailed out: {line[:200]!r}")
        plan = _TAP_PLAN.match(line)
        if plan is not None:
            plans.append(int(plan.group(1)))
            continue
        point = _TAP_POINT.match(line)
        if point is None:
            continue  # comments, "TAP version", anything else a consumer ignores
        failed, number, description = point.group(1), point.group(2), point.group(3)
        directive = _TAP_DIRECTIVE.match(description)
        if directive is not None:
            verdict, description = TestVerdict.SKIPPED, directive.group(1)
        else:
            verdict = TestVerdict.WRONG_ANSWER if failed else TestVerdict.PASSED
        numbers.append(int(number) if number is not None else None)
        name = description.strip() or f"test {len(results) + 1}"
        results.append(TestResult(name=name[:MESSAGE_CHARS], verdict=verdict))
        if len(results) > MAX_CASES:
            return ParsedReport(problem=f"it lists more than {MAX_CASES} tests")
        collecting = verdict is TestVerdict.WRONG_ANSWER
    if detail:
        _tap_detail(results, detail)
    if not plans:
        return ParsedReport(problem="it has no plan line (1..N): the run did not finish")
    if len(plans) > 1:
        return ParsedReport(problem=f"it has {len(plans)} plan lines")
    if plans[0] != len(results):
        return ParsedReport(
            problem=f"its plan announces {plans[0]} tests but it has {len(results)} test points"
        )
    if any(n is not None and n != i for i, n in enumerate(numbers, start=1)):
        return ParsedReport(problem="its test numbers are out of order or repeated")
    return ParsedReport(tests=results)


def _tap_detail(results: list[TestResult], detail: list[str]) -> None:
    """The indented lines after a failed test point become its message."""
    text = "\n".join(line for line in detail if line not in ("---", "..."))
    results[-1] = results[-1].model_copy(update={"message": text[:MESSAGE_CHARS] or None})
    detail.clear()
