"""What the judge is asked and what it answers: hidden tests of each kind, verdicts, results.

The request models are the wire format of ``POST /v1/judge`` and of every item of
``POST /v1/evaluate`` (``extra="forbid"``, bounded sizes); :mod:`sandbox.judge`
runs them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from sandbox.core.execution import MAX_CODE_BYTES
from sandbox.core.validation import FileMap, PriorityClassName, RelativePath, check_depth
from sandbox.policy import LimitOverrides
from sandbox.runner.harness.wire import MAX_DEPTH

MAX_CASES = 10_000
MAX_TEST_FILES = 64
MAX_COMMAND_ARGS = 256
MAX_COMMAND_CHARS = 64 * 1024
MESSAGE_CHARS = 500  # a test's message, as reported
# How deeply a function case's value may nest: well inside what the wire carries.
MAX_VALUE_DEPTH = MAX_DEPTH // 2


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
        "tests for any language, with the expected outputs kept outside the container. Only "
        "what it prints is evidence: a driver that prints nothing (every expected_stdout "
        "blank) runs in the judge's process in Python and is refused in other languages.",
    )
    compare: Literal["exact", "rstrip", "tokens", "float"] = "rstrip"
    float_rel_tol: float = Field(default=1e-6, ge=0)
    float_abs_tol: float = Field(default=1e-9, ge=0)

    @property
    def silent_driver(self) -> bool:
        """A driver with nothing to compare (every expected output blank): its tests are
        asserts whose only evidence would be the candidate's own exit status."""
        return self.driver is not None and not any(c.expected_stdout.strip() for c in self.cases)


class FunctionCase(_Wire):
    """Arguments for one call and the value it must return (JSON, or wire-tagged values)."""

    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None
    weight: float = Field(default=1.0, gt=0)
    name: str | None = None

    @field_validator("args", "kwargs", "expected")
    @classmethod
    def _bounded(cls, value: Any, info: ValidationInfo) -> Any:
        return check_depth(value, MAX_VALUE_DEPTH, info.field_name or "value")


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
    files: FileMap = Field(min_length=1, max_length=MAX_TEST_FILES)
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
    files: FileMap = Field(min_length=1, max_length=MAX_TEST_FILES)
    command: list[str] | str = Field(
        description="argv, or a string run with `bash -c`, in the directory holding the "
        "candidate's file and the test files."
    )
    report: Literal["junit", "go-json", "tap"] = Field(
        description="The report's format: JUnit XML, `go test -json` events, or TAP."
    )
    report_path: RelativePath | None = Field(
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
    priority_class: PriorityClassName = None


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
