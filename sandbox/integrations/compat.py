"""The request and response shapes RL frameworks already speak, mapped onto ours.

- SandboxFusion's ``/run_code`` (what verl's sandbox-fusion reward code and
  SandboxFusion's own client send): run one program, answer with
  ``compile_result`` / ``run_result``. Every field of SandboxFusion's request is
  accepted; ``args`` go on the program's command line. Timeouts and memory above
  the policy are lowered to the policy's (those clients always send their
  defaults); ``compile_timeout`` does not bound the builds SandboxFusion does
  not have (``Language.own_build``: TypeScript, Kotlin scripts, jest).
  Every language of :mod:`sandbox.languages` answers, by SandboxFusion's names;
  in its test-runner modes (``pytest``, ``junit``, ``go_test``, ``jest``)
  ``Success`` needs the runner's own report to show a pass (:mod:`.runner_reports`).
  A run the platform could not carry out is tried again; when it still cannot (or
  the pool is saturated) the router answers 504 with
  ``Retry-After``: the only status verl's client retries.
- OpenRLHF's remote reward (``/get_reward``): ``query`` (prompt + response),
  ``prompts`` and ``labels`` in; ``rewards``, ``scores`` and ``extra_logs``
  out, every one a list of numbers (OpenRLHF turns each into a tensor). Each
  label carries the hidden tests: a :class:`~sandbox.judge.JudgeRequest` without
  ``code`` (JSON object or string); the code is the response's last fenced code
  block, or the whole response. At most :data:`GET_REWARD_CONCURRENCY` samples
  (and no more than the policy's pool holds) are judged at once. A sample that
  still cannot be judged after our retries fails the whole request with
  :class:`UnjudgedError` (503 + ``Retry-After``; OpenRLHF retries any HTTP
  error): a reward of 0 or null would be wrong or crash the trainer.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from sandbox.backends.base import WORKDIR
from sandbox.core.execution import (
    MAX_ARGS,
    MAX_CODE_BYTES,
    MAX_FETCH,
    MAX_STDIN_BYTES,
    ExecutionService,
    RunRequest,
)
from sandbox.core.validation import check_relative_path, dotted, lone_surrogate
from sandbox.errors import CapacityError, InfrastructureError, InvalidRequestError
from sandbox.judge.batches import DEFAULT_CONCURRENCY
from sandbox.judge.judge import Judge, JudgeRequest, JudgeResult, unjudged
from sandbox.languages import get_language
from sandbox.policy import LimitOverrides
from sandbox.policy.limits import MIN_MEMORY_MB, MIN_TIME_S
from sandbox.results import ExecResult, ExecStatus

from .runner_reports import report_problem

INFRA_RETRIES = 2
RETRY_DELAY_S = 1.0
MAX_RETRY_DELAY_S = 2.0
GET_REWARD_CONCURRENCY = DEFAULT_CONCURRENCY
UNJUDGED_RETRY_AFTER_S = 5.0
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def _workspace_path(path: str) -> str:
    """SandboxFusion takes absolute ``files`` and ``fetch_files`` anywhere; here, only
    the working directory is writable and fetched from: say so, with the fix."""
    if path.startswith("/"):
        raise InvalidRequestError(
            f"file path {path[:80]!r} is absolute: SandboxFusion writes and fetches files "
            "anywhere, but here the root file system is read-only and only the working "
            f"directory ({WORKDIR}) is written and fetched; send the path relative to it "
            f"(for example {path.lstrip('/')[:80]!r})"
        )
    return check_relative_path(path)


WorkspacePath = Annotated[str, AfterValidator(_workspace_path)]


class RunCodeRequest(BaseModel):
    """SandboxFusion's ``/run_code`` request: every field its server model and client have."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(max_length=MAX_CODE_BYTES)
    language: str = "python"
    stdin: str | None = Field(default=None, max_length=MAX_STDIN_BYTES)
    compile_timeout: float = Field(default=10, ge=MIN_TIME_S, allow_inf_nan=False)
    run_timeout: float = Field(default=10, ge=MIN_TIME_S, allow_inf_nan=False)
    memory_limit_MB: int = Field(
        default=-1, description=f"0 or less: the policy's; else at least {MIN_MEMORY_MB}"
    )
    files: dict[WorkspacePath, str | None] = Field(
        default_factory=dict, description="path (relative to the working directory) -> base64"
    )
    fetch_files: list[WorkspacePath] = Field(
        default_factory=list,
        max_length=MAX_FETCH,
        description="Paths relative to the working directory (the only one fetched from).",
    )
    args: list[str] = Field(
        default_factory=list,
        max_length=MAX_ARGS,
        description="Appended to the program's command line (SandboxFusion gives them to pytest).",
    )


class CommandRunResult(BaseModel):
    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    cpu_time: float | None = None
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
        cpu_time=result.usage.cpu_s,
        return_code=code,
        stdout=result.stdout.decode("utf-8", errors="replace"),
        stderr=result.stderr.decode("utf-8", errors="replace"),
    )


def _platform_failure(built: ExecResult | None, ran: ExecResult | None) -> ExecResult | None:
    """The build or run the platform (not the program) failed, if any."""
    last = ran if ran is not None else built
    return last if last is not None and last.status is ExecStatus.INFRA_ERROR else None


async def run_code(
    service: ExecutionService, request: RunCodeRequest, *, tenant: str, policy: str = "default"
) -> RunCodeResponse:
    """Run a SandboxFusion request on our pool.

    A run the platform failed is tried again (:data:`INFRA_RETRIES` times); if it still
    fails, :class:`~sandbox.errors.InfrastructureError`. A saturated pool raises
    :class:`~sandbox.errors.CapacityError`. The router answers both with 504.
    """
    limits = service.policy(policy).resources
    language = get_language(request.language)
    if 0 < request.memory_limit_MB < MIN_MEMORY_MB:
        raise InvalidRequestError(
            f"memory_limit_MB={request.memory_limit_MB} is below {MIN_MEMORY_MB}; send at least "
            f"{MIN_MEMORY_MB}, or -1 for the policy's"
        )
    overrides = LimitOverrides(
        wall_time_s=min(request.run_timeout, limits.wall_time_s),
        cpu_time_s=min(request.run_timeout, limits.cpu_time_s),
        compile_time_s=(
            limits.compile_time_s
            if language.own_build
            else min(request.compile_timeout, limits.compile_time_s)
        ),
        memory_mb=(
            min(request.memory_limit_MB, limits.memory_mb) if request.memory_limit_MB > 0 else None
        ),
    )
    ours = RunRequest(
        language=request.language,
        code=request.code,
        stdin=request.stdin or "",
        files_base64={path: data or "" for path, data in request.files.items()},
        args=request.args,
        policy=policy,
        limits=overrides,
        fetch_files=request.fetch_files,
    )
    built, ran = await service.run_program(ours, tenant=tenant)
    for _ in range(INFRA_RETRIES):
        if _platform_failure(built, ran) is None:
            break
        await asyncio.sleep(RETRY_DELAY_S)
        built, ran = await service.run_program(ours, tenant=tenant)
    failed = _platform_failure(built, ran)
    if failed is not None:
        raise InfrastructureError(
            f"the platform could not run the program ({failed.error or 'infrastructure error'}) "
            f"in {1 + INFRA_RETRIES} attempts; retry the request"
        )
    compile_result = _command_result(built) if built is not None else None
    run_result = _command_result(ran) if ran is not None else None
    ok = ran is not None and ran.status is ExecStatus.OK
    problem = report_problem(language, ran) if ran is not None else None
    fetched = {
        path: data
        for path, data in (ran.files if ran else {}).items()
        if path in request.fetch_files or path not in language.report_paths
    }
    return RunCodeResponse(
        status="Success" if ok and problem is None else "Failed",
        message=problem or "",
        compile_result=compile_result,
        run_result=run_result,
        files={path: _b64(data) for path, data in fetched.items()},
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
    """OpenRLHF's remote reward answer: only numbers (it makes a tensor of every list)."""

    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]] = Field(
        description="Per sample, as floats: pass_rate, passed, total, all_passed (0/1), "
        "compile_error (0/1), timeout (0/1), infra_error (0/1; always 0 in an answer)."
    )


class UnjudgedError(InfrastructureError):
    """Some samples of a ``/get_reward`` request could not be judged: retry the request."""

    def __init__(self, message: str, *, retry_after: float = UNJUDGED_RETRY_AFTER_S) -> None:
        self.retry_after = retry_after
        super().__init__(message)


def extract_code(response: str) -> str:
    """The last fenced code block of a model's response, or the whole response."""
    blocks = _FENCE.findall(response)
    return blocks[-1] if blocks else response


def judge_request_from_label(label: Any, code: str, index: int) -> JudgeRequest:
    """A label (tests without code, as JSON text or object) plus the code to judge."""
    if isinstance(label, str):
        try:
            label = json.loads(label)
        except (ValueError, RecursionError) as exc:
            raise InvalidRequestError(f"labels[{index}] is not JSON: {exc}") from None
    if not isinstance(label, dict):
        raise InvalidRequestError(f"labels[{index}] must be an object with 'tests'")
    where = lone_surrogate(label)
    if where is not None:
        raise InvalidRequestError(
            f"labels[{index}].{dotted(where)}: not valid UTF-8 text (a lone surrogate); send text"
        )
    try:
        return JudgeRequest.model_validate({**label, "code": code})
    except ValidationError as exc:
        error = exc.errors()[0]
        raise InvalidRequestError(
            f"labels[{index}].{dotted(error['loc'])}: {error['msg']}"
        ) from None


async def judge_with_retries(judge: Judge, request: JudgeRequest, *, tenant: str) -> JudgeResult:
    """Judge, retrying what was no verdict on the code: an infrastructure failure, or a
    saturated pool (:class:`~sandbox.errors.CapacityError`), :data:`INFRA_RETRIES` times.

    Returns an unjudged result (reward None, ``error_class`` ``"infra"``) if every try failed.
    """
    started = time.perf_counter()
    result = unjudged(request, "not judged", started)
    for attempt in range(1 + INFRA_RETRIES):
        delay = RETRY_DELAY_S
        try:
            result = await judge.judge(request, tenant=tenant)
        except CapacityError as exc:
            result = unjudged(request, str(exc), started)
            delay = min(max(exc.retry_after, RETRY_DELAY_S), MAX_RETRY_DELAY_S)
        if result.reward is not None:
            return result
        if attempt < INFRA_RETRIES:
            await asyncio.sleep(delay)
    return result


def _flag(value: bool) -> float:
    return 1.0 if value else 0.0


async def get_reward(
    judge: Judge,
    request: RewardRequest,
    *,
    tenant: str,
    allow_policy: Callable[[str], None] = lambda _: None,
) -> RewardResponse:
    """Judge every (response, label) pair; ``allow_policy`` vets each label's policy.

    At most :data:`GET_REWARD_CONCURRENCY` samples of a policy are judged at once, and no
    more than its pool's ``max``: the rest wait here rather than in (or refused by) the
    pool's queue. Raises :class:`UnjudgedError` if any sample got no verdict.
    """
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
    limits: dict[str, asyncio.Semaphore] = {}
    for item in items:
        allow_policy(item.policy)
        _, policy, *_ = judge.plan(item)
        if item.policy not in limits:
            limits[item.policy] = asyncio.Semaphore(
                max(1, min(GET_REWARD_CONCURRENCY, policy.pool.max))
            )

    async def one(item: JudgeRequest) -> JudgeResult:
        async with limits[item.policy]:
            return await judge_with_retries(judge, item, tenant=tenant)

    results = await asyncio.gather(*(one(item) for item in items))
    missing = [index for index, r in enumerate(results) if r.reward is None]
    if missing:
        first = results[missing[0]]
        raise UnjudgedError(
            f"{len(missing)} of {len(results)} samples could not be judged after "
            f"{1 + INFRA_RETRIES} attempts (samples {missing[:10]}; first: "
            f"{first.message or first.error_class}); no reward was made up, retry the request"
        )
    rewards = [float(r.reward) for r in results if r.reward is not None]
    return RewardResponse(
        rewards=rewards,
        scores=rewards,
        extra_logs={
            "pass_rate": [r.passed / r.total if r.total else 0.0 for r in results],
            "passed": [float(r.passed) for r in results],
            "total": [float(r.total) for r in results],
            "all_passed": [_flag(r.all_passed) for r in results],
            "compile_error": [_flag(r.error_class == "compile_error") for r in results],
            "timeout": [_flag(r.error_class == "timeout") for r in results],
            "infra_error": [_flag(r.error_class == "infra") for r in results],
        },
    )
