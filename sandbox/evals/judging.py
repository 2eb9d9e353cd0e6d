"""Judging a trial: a task's session started, its hidden tests run, the verdict read.

Shared by the evaluator's trials (:mod:`.runner`) and by episodes driven call by
call (:mod:`.episodes`), so a pass means the same thing in evaluation and in
training. Pytest-judged tests pass on the platform harness's nonce-checked
report; a ``tests.command`` on its exit status; Harbor and Terminal-Bench tasks
(``Task.judged_by_reward``) on the reward file their tests wrote
(:mod:`.reward_files`). A Harbor task whose separate verifier has an image of its
own (``Task.verifier_environment``) is judged in a fresh session of that
environment, given the agent's artifacts.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import time
from collections import Counter
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from sandbox.core.argv import shell_command
from sandbox.core.sessions import Command, SessionManager, SessionSpec
from sandbox.environments import EnvironmentSpec
from sandbox.errors import (
    ContainerLostError,
    InvalidRequestError,
    PayloadTooLargeError,
    SandboxError,
)
from sandbox.results import ExecResult, ExecStatus

from .reward_files import REWARD_FILES, judge_rewards
from .tasks import Task

logger = logging.getLogger(__name__)

TAIL_CHARS: Final = 4000


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    AGENT_TIMEOUT = "agent_timeout"
    BUDGET_EXHAUSTED = "budget_exhausted"
    TEST_TIMEOUT = "test_timeout"
    INFRA_ERROR = "infra_error"


OUTCOMES: Final = tuple(o.value for o in Outcome)


def tail(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= TAIL_CHARS else "[...]" + text[-TAIL_CHARS:]


# ------------------------------------------------------------------------------ judging


class PytestReport(BaseModel):
    """What the platform's pytest harness sends on the runner's report channel (nonce checked)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    exitstatus: int
    collected: list[str]
    collect_errors: list[str]
    outcomes: dict[str, Literal["passed", "skipped", "failed", "error"]]


def judge_report(
    channel: Mapping[str, Any] | None,
) -> tuple[dict[str, int] | None, str | None]:
    """Counts (tests, passed, failures, errors, skipped) of the harness's report; why not a pass.

    A collection error, and a collected test without an outcome (the session was
    cut short), count as errors.
    """
    if channel is None:
        return None, "the test run had no report channel"
    if "report" not in channel:
        return None, str(channel.get("error") or "no report came on the channel")
    try:
        report = PytestReport.model_validate(channel["report"])
    except ValidationError as exc:
        return None, f"the report on the channel is malformed ({exc.error_count()} problems)"
    names = {*report.collected, *report.outcomes}
    missing = [name for name in report.collected if name not in report.outcomes]
    outcomes = Counter(report.outcomes.values())
    counts = {
        "tests": len(names),
        "passed": outcomes["passed"],
        "failures": outcomes["failed"],
        "errors": outcomes["error"] + len(report.collect_errors) + len(missing),
        "skipped": outcomes["skipped"],
    }
    if report.collect_errors:
        return counts, f"{len(report.collect_errors)} error(s) while collecting the tests"
    if missing:
        return counts, f"{len(missing)} collected test(s) never ran to an outcome"
    if counts["failures"] or counts["errors"]:
        return counts, "the report lists failures or errors"
    if report.exitstatus != 0:
        return counts, f"pytest's own exit status was {report.exitstatus}"
    if counts["passed"] < 1:
        return counts, "the report holds no passed test"
    return counts, None


def tests_verdict(
    result: ExecResult, *, pytest: bool
) -> tuple[bool, dict[str, int] | None, str | None]:
    """(passed, report counts, why not) of one run of the hidden tests.

    A ``command`` passes when it exits 0. A pytest run passes only when pytest
    exits 0 *and* the harness's report, with this run's nonce, came on the
    channel, lists at least one passed test and nothing failed, erred or went
    missing: exiting 0 early (``os._exit(0)`` at import) sends no report.
    """
    counts, problem = judge_report(result.channel) if pytest else (None, None)
    if result.status is not ExecStatus.OK or result.exit_code != 0:
        ended = f"the tests ended with {result.status.value}, exit {result.exit_code}"
        return False, counts, ended if problem is None else f"{ended}; {problem}"
    if problem is not None:
        return False, counts, problem
    return True, counts, None


def reward_verdict(result: ExecResult) -> tuple[bool, float | None, dict[str, float], str | None]:
    """(passed, reward, rewards, why not) of tests judged by the reward file they wrote.

    The tests must have run to their end (any exit status); then the reward decides.
    """
    verdict = judge_rewards(result.files, result.file_errors)
    if result.status not in (ExecStatus.OK, ExecStatus.NONZERO_EXIT):
        ended = f"the tests ended with {result.status.value}"
        return False, verdict.reward, verdict.rewards, ended
    return (
        verdict.passed,
        verdict.reward,
        verdict.rewards,
        verdict.reason or (None if verdict.passed else f"the reward {verdict.reward} is below 1"),
    )


class SetupFailed(SandboxError):
    """The task's own set-up command failed: no verdict about the agent."""


def _files_base64(files: Mapping[str, bytes]) -> dict[str, str]:
    return {path: base64.b64encode(data).decode("ascii") for path, data in files.items()}


async def start_task_session(
    sessions: SessionManager,
    task: Task,
    *,
    tenant: str,
    record: dict[str, Any],
    from_snapshot: str | None = None,
) -> str:
    """A session ready for the agent: the task's environment, files (executable bits kept)
    and ``setup``; or a copy of ``from_snapshot``, a snapshot of such a session.

    Returns the session's id (also kept in ``record["_session"]`` so a caller closes it
    whatever happens after); ``record`` gains the environment's details. Raises
    :class:`SetupFailed` when the task's set-up fails, :class:`SandboxError` when the
    platform cannot start the session.
    """
    config = task.config
    if from_snapshot is not None:
        session = await sessions.create(SessionSpec(from_snapshot=from_snapshot), tenant=tenant)
        record["_session"] = session.id
        return session.id
    spec = SessionSpec(
        image=config.image, policy=config.policy, files_base64=_files_base64(task.files)
    )
    if task.environment is not None:
        spec = await _in_environment(sessions, task, task.environment, spec, record, tenant=tenant)
    session = await sessions.create(spec, tenant=tenant)
    record["_session"] = session.id
    if session.notes:
        record["environment"]["notes"] += session.notes
    if task.executable:
        chmod = shell_command("chmod", "+x", paths=sorted(task.executable))
        await sessions.exec(session.id, Command(command=chmod), tenant=tenant)
    if config.setup:
        result = await sessions.exec(session.id, Command(command=config.setup), tenant=tenant)
        if result.status is not ExecStatus.OK:
            raise SetupFailed(
                f"the task's setup failed ({result.status.value}, exit {result.exit_code}): "
                f"{tail(result.stderr or result.stdout)[-500:]}"
            )
    return session.id


async def _in_environment(
    sessions: SessionManager,
    task: Task,
    environment: EnvironmentSpec,
    spec: SessionSpec,
    record: dict[str, Any],
    key: str = "environment",
    *,
    tenant: str,
) -> SessionSpec:
    """Build the task's environment (or find it built) and point ``spec`` at it; its
    details go in ``record[key]``.

    On a platform without the environment builder, a task whose environment is
    one of the built-in images (a Dockerfile that only lays files over one) runs
    on it as it is; any other is refused, saying why it needs the builder.
    """
    if sessions.environments is None:
        why = task.needs_own_environment
        if why is None:
            return spec
        raise InvalidRequestError(
            f"{task.path}: {why}, and this platform has no environment builder "
            "(sandbox.environments); run it where the service builds environments"
        )
    built = await asyncio.to_thread(
        functools.partial(
            sessions.environments.build, environment, tenant=tenant, progress=logger.info
        )
    )
    env_id = built.record.environment
    record[key] = {
        "id": env_id,
        "image": built.record.image,
        "cached": built.cached,
        "build_seconds": built.record.build_seconds,
        "build_log": str(sessions.environments.records.log_path(env_id)),
        "notes": list(built.record.notes),
    }
    return spec.model_copy(
        update={
            "environment": env_id,
            "policy": environment.base_policy,
            "resources": environment.resources,
            "root": environment.root,
            "env": dict(environment.env),
        }
    )


async def _run_tests(
    sessions: SessionManager, session_id: str, task: Task, tenant: str
) -> ExecResult:
    tests = task.config.tests
    return await sessions.run_hidden_tests(
        session_id,
        task.tests,
        command=tests.command,
        timeout_s=tests.timeout_s,
        tenant=tenant,
        collect=REWARD_FILES if task.judged_by_reward else (),
        isolate_agent=tests.isolate_agent,
        agent_run=task.judged_by_reward,
    )


async def _judge_separately(
    sessions: SessionManager, session_id: str, task: Task, tenant: str, record: dict[str, Any]
) -> ExecResult:
    """Harbor's separate verifier: a fresh session of the verifier's own environment gets
    the agent's artifacts (once every process of the agent is killed) and runs the tests;
    then it is closed. ``record["verifier_environment"]`` gets its build's details."""
    assert task.verifier_environment is not None
    spec = await _in_environment(
        sessions,
        task,
        task.verifier_environment,
        SessionSpec(policy=task.config.policy),
        record,
        key="verifier_environment",
        tenant=tenant,
    )
    verifier = await sessions.create(spec, tenant=tenant)
    notes = record["verifier_environment"]["notes"]
    try:
        notes += verifier.notes
        try:
            await sessions.hand_over(session_id, verifier.id, task.artifacts, tenant=tenant)
        except SandboxError as exc:
            # What the agent left is its doing: judged without it (as Harbor's best-effort
            # artifact copy goes on), never an infra error that would drop the trial. A
            # root agent's session can fail in any way (it may have killed its runner).
            if not (task.root_agent or isinstance(exc, PayloadTooLargeError)):
                raise
            notes.append(f"the agent's artifacts were not handed to the verifier: {exc}")
        try:
            return await _run_tests(sessions, verifier.id, task, tenant)
        except ContainerLostError as exc:
            if not spec.root:
                raise
            # Root tests run what the agent left as root: its end of the container is theirs.
            return ExecResult(
                status=ExecStatus.SIGNAL,
                reason=f"the verifier's container ended while its tests ran as root: {exc}",
            )
    finally:
        with contextlib.suppress(SandboxError):
            await sessions.close(verifier.id, tenant=tenant)


async def judge_session(
    sessions: SessionManager, session_id: str, task: Task, *, tenant: str, record: dict[str, Any]
) -> Outcome:
    """Run the task's hidden tests on the session (the agent has stopped) and read the verdict.

    ``passed``, ``failed``, ``test_timeout`` or ``infra_error``; ``record`` gains
    ``tests`` (status, report counts, reward, why not, output tails), ``tests_passed``,
    ``tests_s`` and, on ``infra_error``, ``error``.
    """
    config = task.config
    started = time.monotonic()
    try:
        if task.verifier_environment is None:
            result = await _run_tests(sessions, session_id, task, tenant)
        else:
            result = await _judge_separately(sessions, session_id, task, tenant, record)
    except SandboxError as exc:
        record["error"] = f"the hidden tests could not run: {exc}"
        return Outcome.INFRA_ERROR
    record["tests_s"] = round(time.monotonic() - started, 4)
    rewards: dict[str, Any] = {}
    if task.judged_by_reward:
        passed, reward, named, why = reward_verdict(result)
        counts = None
        rewards = {"reward": reward, "rewards": named}
    else:
        passed, counts, why = tests_verdict(result, pytest=config.tests.pytest)
    record["tests"] = {
        **rewards,
        "status": result.status.value,
        "exit_code": result.exit_code,
        "report": counts,
        "reason": why,
        "wall_s": round(result.usage.wall_s, 4),
        "stdout_tail": tail(result.stdout),
        "stderr_tail": tail(result.stderr),
    }
    if result.status is ExecStatus.INFRA_ERROR:
        record["error"] = f"the hidden tests hit a platform error: {result.error}"
        return Outcome.INFRA_ERROR
    record["tests_passed"] = passed and result.status is not ExecStatus.TIMEOUT
    if result.status is ExecStatus.TIMEOUT:
        return Outcome.TEST_TIMEOUT
    return Outcome.PASSED if passed else Outcome.FAILED
