"""What an execution produced: status, exit code, output, files and resource use."""

from __future__ import annotations

import base64
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ExecStatus(StrEnum):
    """Why a program stopped. Only ``infra_error`` is the platform's fault."""

    OK = "ok"
    NONZERO_EXIT = "nonzero_exit"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    SIGNAL = "signal"
    COMPILE_ERROR = "compile_error"
    INFRA_ERROR = "infra_error"


class ResourceUsage(BaseModel):
    """Resources one execution used, as the kernel reported them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_memory_bytes: int | None = None


class ExecLimits(BaseModel):
    """Per-execution limits the runner enforces (already clamped to the policy)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float
    cpu_s: float
    stdout_bytes: int
    stderr_bytes: int
    nofile: int
    fsize_bytes: int
    compile_s: float = Field(default=30.0, description="Wall and CPU limit of a build.")
    memory_bytes: int | None = Field(
        default=None, description="Lower than the container's memory limit, or None."
    )


class ExecResult(BaseModel):
    """The outcome of one program run inside a sandbox."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: ExecStatus
    exit_code: int | None = None
    signal: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    usage: ResourceUsage = ResourceUsage()
    reason: str | None = Field(default=None, description="Which limit stopped the program.")
    files: dict[str, bytes] = {}
    file_errors: dict[str, str] = {}
    error: str | None = Field(default=None, description="Infrastructure error message.")
    oom_killed: bool = Field(default=False, description="The kernel OOM-killed a process.")
    peer: dict[str, Any] | None = Field(
        default=None, description="Exit and output of the peer process, for paired runs."
    )
    channel: dict[str, Any] | None = Field(
        default=None,
        description="What came back on the runner's report channel: {'report': ...} with "
        "the nonce checked, or {'error': ...}; None when the run had no channel.",
    )

    @property
    def anomalous(self) -> bool:
        """True when the runner had to kill something: the container should be retired."""
        return self.reason is not None or self.status in (
            ExecStatus.INFRA_ERROR,
            ExecStatus.MEMORY_LIMIT,
        )


def _text(data: bytes) -> tuple[str, str | None]:
    """Output as text, plus its exact bytes in base64 when it is not valid UTF-8."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), base64.b64encode(data).decode("ascii")


class RunResult(BaseModel):
    """An execution result on the wire (JSON): text output, files in base64."""

    model_config = ConfigDict(extra="forbid")

    status: ExecStatus
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_base64: str | None = Field(
        default=None, description="The exact stdout bytes, present only when not valid UTF-8."
    )
    stderr_base64: str | None = Field(
        default=None, description="The exact stderr bytes, present only when not valid UTF-8."
    )
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    usage: ResourceUsage = ResourceUsage()
    reason: str | None = None
    files: dict[str, str] = Field(default_factory=dict, description="Fetched files, base64.")
    file_errors: dict[str, str] = Field(default_factory=dict)
    error: str | None = None

    @classmethod
    def from_exec(cls, result: ExecResult) -> RunResult:
        stdout, stdout_b64 = _text(result.stdout)
        stderr, stderr_b64 = _text(result.stderr)
        return cls(
            status=result.status,
            exit_code=result.exit_code,
            signal=result.signal,
            stdout=stdout,
            stderr=stderr,
            stdout_base64=stdout_b64,
            stderr_base64=stderr_b64,
            stdout_truncated=result.stdout_truncated,
            stderr_truncated=result.stderr_truncated,
            usage=result.usage,
            reason=result.reason,
            files={p: base64.b64encode(d).decode("ascii") for p, d in result.files.items()},
            file_errors=result.file_errors,
            error=result.error,
        )

    def stdout_bytes(self) -> bytes:
        """The exact stdout bytes."""
        if self.stdout_base64 is not None:
            return base64.b64decode(self.stdout_base64)
        return self.stdout.encode()

    def stderr_bytes(self) -> bytes:
        """The exact stderr bytes."""
        if self.stderr_base64 is not None:
            return base64.b64decode(self.stderr_base64)
        return self.stderr.encode()

    def file(self, path: str) -> bytes:
        """A fetched file's bytes; KeyError with the reason when it could not be fetched."""
        if path in self.files:
            return base64.b64decode(self.files[path])
        raise KeyError(f"{path}: {self.file_errors.get(path, 'not requested')}")


# ------------------------------------------------------------------ episodes (/v1/episodes)


class TaskInfo(BaseModel):
    """A task one can open episodes of (`GET /v1/tasks`)."""

    task: str
    id: str
    digest: str
    instruction: str
    category: str | None = None
    difficulty: str


class StepResult(BaseModel):
    """What one tool call returned."""

    observation: str = Field(description="The tool's output, as the policy should read it.")
    done: bool = Field(description="The episode takes no more tool calls: judge it.")
    steps: int = Field(description="Tool calls made so far.")
    steps_left: int


class EpisodeResult(BaseModel):
    """An episode's verdict: the evaluator's outcome and the reward a trainer may use."""

    episode: str
    task: str
    outcome: str = Field(description="passed, failed, agent_timeout, budget_exhausted, ...")
    reward: float | None = Field(description="None when the platform failed: drop the episode.")
    passed: bool | None
    steps: int
    tests: dict[str, Any] | None = None
    error: str | None = None
    wall_s: float


class EpisodeInfo(BaseModel):
    """An open episode."""

    id: str
    task: str
    instruction: str
    session_id: str
    steps: int
    max_steps: int
    time_left_s: float
    done: bool
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="The tools to call, as OpenAI function schemas."
    )
