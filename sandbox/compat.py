"""The request and response shapes RL frameworks already speak, mapped onto ours.

- SandboxFusion's ``/run_code`` (what verl's sandbox-fusion reward code and
  SandboxFusion's own client send): run one program, answer with
  ``compile_result`` / ``run_result``. Timeouts and memory above the policy
  are lowered to the policy's (those clients always send their defaults).
- OpenRLHF's remote reward (``/get_reward``): ``query`` (prompt + response),
  ``prompts`` and ``labels`` in; ``rewards``, ``scores`` and ``extra_logs``
  out. Each label carries the hidden tests: a :class:`~sandbox.judge.JudgeRequest`
  without ``code`` (JSON object or string); the code is the response's last
  fenced code block, or the whole response.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InvalidRequestError
from .execution import ExecutionService, RunRequest
from .judge import Judge, JudgeRequest, JudgeResult
from .policy import MIN_MEMORY_MB, MIN_TIME_S, LimitOverrides
from .results import ExecResult, ExecStatus

INFRA_RETRIES = 2
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


class RunCodeRequest(BaseModel):
    """SandboxFusion's ``/run_code`` request."""

    model_config = ConfigDict(extra="forbid")

    code: str
    language: str = "python"
    stdin: str | None = None
    compile_timeout: float = Field(default=10, ge=MIN_TIME_S, allow_inf_nan=False)
    run_timeout: float = Field(default=10, ge=MIN_TIME_S, allow_inf_nan=False)
    memory_limit_MB: int = Field(
        default=-1, description=f"0 or less: the policy's; else at least {MIN_MEMORY_MB}"
    )
    files: dict[str, str | None] = Field(default_factory=dict, description="path -> base64")
    fetch_files: list[str] = Field(default_factory=list)


class CommandRunResult(BaseModel):
    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    """SandboxFusion's ``/run_code`` response."""

    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


def _command_result(result: ExecResult) -> CommandRunResult:
    if result.status is ExecStatus.TIMEOUT:
        status: Literal["Finished", "Error", "TimeLimitExceeded"] = "TimeLimitExceeded"
    elif result.status is ExecStatus.INFRA_ERROR:
        status = "Error"
    else:
        status = "Finished"
    code = result.exit_code
    if code is None and result.signal is not None:
        code = 128 + result.signal
    return CommandRunResult(
        status=status,
        execution_time=result.usage.wall_s,
        return_code=code,
        stdout=result.stdout.decode("utf-8", errors="replace"),
        stderr=result.stderr.decode("utf-8", errors="replace"),
    )


async def run_code(
    service: ExecutionService, request: RunCodeRequest, *, tenant: str, policy: str = "default"
) -> RunCodeResponse:
    """Run a SandboxFusion request on our pool."""
    limits = service.policy(policy).resources
    if 0 < request.memory_limit_MB < MIN_MEMORY_MB:
        raise InvalidRequestError(
            f"memory_limit_MB={request.memory_limit_MB} is below {MIN_MEMORY_MB}; send at least "
            f"{MIN_MEMORY_MB}, or -1 for the policy's"
        )
    overrides = LimitOverrides(
        wall_time_s=min(request.run_timeout, limits.wall_time_s),
        cpu_time_s=min(request.run_timeout, limits.cpu_time_s),
        compile_time_s=min(request.compile_timeout, limits.compile_time_s),
        memory_mb=(
            min(request.memory_limit_MB, limits.memory_mb) if request.memory_limit_MB > 0 else None
        ),
    )
    ours = RunRequest(
        language=request.language,
        code=request.code,
        stdin=request.stdin or "",
        files_base64={path: data or "" for path, data in request.files.items()},
        policy=policy,
        limits=overrides,
        fetch_files=request.fetch_files,
    )
    built, ran = await service.run_program(ours, tenant=tenant)
    compile_result = _command_result(built) if built is not None else None
    if ran is not None and ran.status is ExecStatus.INFRA_ERROR:
        return RunCodeResponse(status="SandboxError", message=ran.error or "infrastructure error")
    run_result = _command_result(ran) if ran is not None else None
    ok = ran is not None and ran.status is ExecStatus.OK
    return RunCodeResponse(
        status="Success" if ok else "Failed",
        compile_result=compile_result,
        run_result=run_result,
        files={path: _b64(data) for path, data in (ran.files if ran else {}).items()},
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class RewardRequest(BaseModel):
    """OpenRLHF's remote reward request."""

    model_config = ConfigDict(extra="forbid")

    query: list[str] = Field(min_length=1)
    prompts: list[str] | None = None
    labels: list[Any] | None = None


class RewardResponse(BaseModel):
    rewards: list[float | None]
    scores: list[float | None]
    extra_logs: dict[str, list[Any]]


def extract_code(response: str) -> str:
    """The last fenced code block of a model's response, or the whole response."""
    blocks = _FENCE.findall(response)
    return blocks[-1] if blocks else response


def judge_request_from_label(label: Any, code: str, index: int) -> JudgeRequest:
    """A label (tests without code, as JSON text or object) plus the code to judge."""
    if isinstance(label, str):
        try:
            label = json.loads(label)
        except ValueError as exc:
            raise InvalidRequestError(f"labels[{index}] is not JSON: {exc}") from None
    if not isinstance(label, dict):
        raise InvalidRequestError(f"labels[{index}] must be an object with 'tests'")
    try:
        return JudgeRequest.model_validate({**label, "code": code})
    except ValidationError as exc:
        raise InvalidRequestError(f"labels[{index}]: {exc.errors()[0]['msg']}") from None


async def judge_with_retries(judge: Judge, request: JudgeRequest, *, tenant: str) -> JudgeResult:
    """Judge, retrying infrastructure failures: a trainer should rarely see a missing reward."""
    result = await judge.judge(request, tenant=tenant)
    for _ in range(INFRA_RETRIES):
        if result.error_class != "infra":
            break
        result = await judge.judge(request, tenant=tenant)
    return result


async def get_reward(
    judge: Judge,
    request: RewardRequest,
    *,
    tenant: str,
    allow_policy: Callable[[str], None] = lambda _: None,
) -> RewardResponse:
    """Judge every (response, label) pair in one go; ``allow_policy`` vets each label's policy."""
    labels = request.labels or []
    if len(labels) != len(request.query):
        raise InvalidRequestError(
            f"labels has {len(labels)} entries for {len(request.query)} queries; each query "
            "needs a label carrying its tests"
        )
    prompts = request.prompts or [""] * len(request.query)
    if len(prompts) != len(request.query):
        raise InvalidRequestError("prompts and query must have the same length")
    items = []
    for index, (query, prompt, label) in enumerate(
        zip(request.query, prompts, labels, strict=True)
    ):
        response = query[len(prompt) :] if prompt and query.startswith(prompt) else query
        items.append(judge_request_from_label(label, extract_code(response), index))
    for item in items:
        allow_policy(item.policy)
        judge.plan(item)
    results = await asyncio.gather(*(judge_with_retries(judge, i, tenant=tenant) for i in items))
    rewards = [r.reward for r in results]
    return RewardResponse(
        rewards=rewards,
        scores=rewards,
        extra_logs={
            "pass_rate": [r.passed / r.total if r.total else 0.0 for r in results],
            "error_class": [r.error_class for r in results],
            "infra_error": [r.error_class == "infra" for r in results],
        },
    )
