"""Run a program in a language under a policy (``POST /v1/run``, ``sandbox run``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from sandbox.backends.base import WORKDIR, Sandbox
from sandbox.core.pool import Pool
from sandbox.core.validation import (
    FileMap,
    MiB,
    PriorityClassName,
    RelativePath,
    decode_files,
)
from sandbox.errors import (
    InfrastructureError,
    InvalidRequestError,
    NotFoundError,
    SandboxTimeoutError,
)
from sandbox.languages import Language, get_language
from sandbox.policy import LimitOverrides, Policy, Resources, effective_limits
from sandbox.results import ExecLimits, ExecResult, ExecStatus
from sandbox.telemetry import context, metrics, tracing
from sandbox.telemetry.audit import AuditLog, code_hash

logger = logging.getLogger(__name__)

MAX_CODE_BYTES = 4 * MiB
MAX_STDIN_BYTES = 16 * MiB
MAX_ARGS = 256
MAX_FETCH = 64

BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": WORKDIR,
    "TMPDIR": "/tmp",
    "USER": "sandbox",
    "LANG": "C.UTF-8",
}


class RunRequest(BaseModel):
    """One program to run: its language, code, inputs and (lowered) limits."""

    model_config = ConfigDict(extra="forbid")

    language: str = "python"
    code: str = Field(max_length=MAX_CODE_BYTES)
    stdin: str = Field(default="", max_length=MAX_STDIN_BYTES)
    args: list[str] = Field(default_factory=list, max_length=MAX_ARGS)
    files: FileMap = Field(
        default_factory=dict, description="Extra files for the working directory: path -> text."
    )
    files_base64: dict[RelativePath, str] = Field(
        default_factory=dict, description="Extra files as bytes: path -> base64."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Variables to pass; the policy's env.allow names them."
    )
    policy: str = "default"
    limits: LimitOverrides | None = None
    fetch_files: list[RelativePath] = Field(
        default_factory=list,
        max_length=MAX_FETCH,
        description="Files to return after the run, relative to the working directory.",
    )
    priority_class: PriorityClassName = None


def exec_limits(policy: Policy, overrides: LimitOverrides | None) -> ExecLimits:
    """Per-execution limits: the policy's, lowered by the request (never raised)."""
    limits: Resources = effective_limits(policy, overrides)
    lowered_memory = limits.memory_mb < policy.resources.memory_mb
    return ExecLimits(
        wall_s=limits.wall_time_s,
        cpu_s=limits.cpu_time_s,
        stdout_bytes=limits.stdout_bytes,
        stderr_bytes=limits.stderr_bytes,
        nofile=limits.open_files,
        fsize_bytes=limits.file_size_mb * MiB,
        compile_s=limits.compile_time_s,
        memory_bytes=limits.memory_mb * MiB if lowered_memory else None,
    )


def sandbox_env(policy: Policy, requested: Mapping[str, str]) -> dict[str, str]:
    """The environment of user code: base, then the policy's ``env.set``, then allowed requests."""
    refused = sorted(set(requested) - set(policy.env.allow))
    if refused:
        allowed = ", ".join(policy.env.allow) or "none"
        raise InvalidRequestError(
            f"environment variables {refused} are not allowed by policy {policy.name!r} "
            f"(allowed: {allowed}); add them to env.allow in the policy or drop them"
        )
    return {**BASE_ENV, **policy.env.set, **requested}


COMPILE_TIME = "compile_time"


def compile_timeout_note(limits: ExecLimits) -> bytes:
    """The line ending the stderr of a build stopped by its time limit."""
    return (
        f"compilation exceeded its time limit of {limits.compile_s:g} s "
        "(compile_time_s; SandboxFusion's compile_timeout)\n"
    ).encode()


async def build(
    sandbox: Sandbox,
    language: Language,
    files: Mapping[str, bytes],
    limits: ExecLimits,
    env: Mapping[str, str],
) -> ExecResult:
    """Write ``files`` and run the language's build under the compile limits.

    A build stopped by its time limit keeps status ``timeout``; its ``reason`` is
    ``compile_time`` and its stderr ends with a line saying so.
    """
    assert language.compile is not None
    compile_limits = limits.model_copy(
        update={"wall_s": limits.compile_s, "cpu_s": limits.compile_s, "memory_bytes": None}
    )
    built = await sandbox.exec(list(language.compile), limits=compile_limits, env=env, files=files)
    if built.status is ExecStatus.TIMEOUT:
        stderr = _ended(built.stderr) + compile_timeout_note(limits)
        built = built.model_copy(update={"reason": COMPILE_TIME, "stderr": stderr})
    return built


def _ended(data: bytes) -> bytes:
    return data if not data or data.endswith(b"\n") else data + b"\n"


def note_status(status: str) -> None:
    """Note on the current call how an execution ended: ``infra`` or ``user`` unless ``ok``."""
    if status == ExecStatus.INFRA_ERROR:
        context.note_failure("infra")
    elif status != ExecStatus.OK:
        context.note_failure("user")


RunObserver = Callable[[RunRequest, str, ExecResult, float], None]


class ExecutionService:
    """Runs :class:`RunRequest` s on a pool, under named policies."""

    def __init__(
        self,
        pool: Pool,
        policies: Mapping[str, Policy],
        resolve_image: Callable[[str], str],
        audit: AuditLog | None = None,
        observer: RunObserver | None = None,
    ) -> None:
        """``observer`` is told of every program :meth:`run` finishes (the console's ring)."""
        self.pool = pool
        self.policies = policies
        self.resolve_image = resolve_image
        self.audit = audit
        self.observer = observer

    def policy(self, name: str) -> Policy:
        try:
            return self.policies[name]
        except KeyError:
            known = ", ".join(sorted(self.policies))
            raise NotFoundError(f"unknown policy {name!r}; use one of: {known}") from None

    async def run(self, request: RunRequest, *, tenant: str) -> ExecResult:
        """Run one program; a failed build is ``compile_error``, infrastructure ``infra_error``."""
        started = time.perf_counter()
        built, ran = await self.run_program(request, tenant=tenant)
        if ran is None:
            assert built is not None
            ran = built.model_copy(update={"status": ExecStatus.COMPILE_ERROR})
        if self.observer is not None:
            self.observer(request, tenant, ran, time.perf_counter() - started)
        return ran

    async def run_program(
        self, request: RunRequest, *, tenant: str
    ) -> tuple[ExecResult | None, ExecResult | None]:
        """The build's result (compiled languages) and the run's (None if the build failed)."""
        language = get_language(request.language).for_code(request.code)
        policy = self.policy(request.policy)
        limits = exec_limits(policy, request.limits)
        env = {**sandbox_env(policy, request.env), **language.env}
        files = self._files(request, language)
        image = self.resolve_image(language.image)
        started = time.perf_counter()
        built: ExecResult | None = None
        ran: ExecResult | None = None
        with tracing.span(
            "execution", tenant=tenant, policy=policy.name, language=language.name
        ) as span:
            try:
                async with self.pool.lease(image, policy, tenant) as lease:
                    if language.compiled:
                        built = await build(lease.sandbox, language, files, limits, env)
                        files = {}
                    if built is None or built.status is ExecStatus.OK:
                        ran = await lease.sandbox.exec(
                            [*language.run, *request.args],
                            limits=limits,
                            stdin=request.stdin.encode(),
                            env=env,
                            files=files,
                            fetch=[*request.fetch_files, *language.report_paths],
                            channel=language.report == "pytest",
                            reset_after=True,
                        )
                        if ran.anomalous:
                            lease.retire(f"execution ended by the runner: {ran.reason}")
            except (InfrastructureError, SandboxTimeoutError) as exc:
                logger.warning("execution failed for infrastructure reasons: %s", exc)
                ran = ExecResult(status=ExecStatus.INFRA_ERROR, error=str(exc))
            status = (ran or built or ExecResult(status=ExecStatus.INFRA_ERROR)).status.value
            if ran is None:
                status = ExecStatus.COMPILE_ERROR.value
            span.set(status=status)
        note_status(status)
        duration = time.perf_counter() - started
        metrics.record_execution(language.name, policy.name, status, duration)
        if self.audit is not None:
            usage = (ran or built or ExecResult(status=ExecStatus.INFRA_ERROR)).usage
            self.audit.record(
                tenant=tenant,
                kind="run",
                policy=policy.name,
                image=image,
                language=language.name,
                code_sha256=code_hash(request.code),
                verdict=status,
                wall_s=usage.wall_s,
                cpu_s=usage.cpu_s,
                peak_memory_bytes=usage.peak_memory_bytes,
                duration_s=round(duration, 6),
            )
        return built, ran

    @staticmethod
    def _files(request: RunRequest, language: Language) -> dict[str, bytes]:
        files = decode_files(request.files, request.files_base64)
        if language.source_file in files:
            raise InvalidRequestError(
                f"{language.source_file!r} holds the code itself; rename that extra file"
            )
        for report in (*language.report_paths, *(path for path, _ in language.support_files)):
            if report in files or report.split("/")[0] in files:
                raise InvalidRequestError(
                    f"{report!r} is {language.name}'s own (its test runner's report or a file "
                    "the platform compiles with the code); rename that extra file"
                )
        return {**files, **language.files(request.code)}
