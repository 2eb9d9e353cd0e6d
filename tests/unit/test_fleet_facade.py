"""The fleet's facade notes on the API's own call how a run or a judgement ended (the host
notes it on its call, which the API's request figures do not see), as a single host does."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray")

from sandbox.core.execution import RunRequest
from sandbox.errors import ContainerLostError
from sandbox.fleet.admission import Admission
from sandbox.fleet.config import FleetConfig
from sandbox.fleet.facade import FleetExecution, FleetJudge, FleetPool
from sandbox.judge.judge import JudgeRequest, JudgeResult
from sandbox.policy import load_policy_dir
from sandbox.results import ExecResult, ExecStatus
from sandbox.service.platform import DEFAULT_POLICIES_DIR
from sandbox.telemetry import context

FAILED = JudgeResult(passed=0, total=1, reward=0.0, error_class="wrong_answer", tests=[])


class Answers:
    """A router whose hosts answer each method with the given value (or lose the call)."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers

    def require_healthy(self) -> None:
        pass

    async def call(self, method: str, *args: Any, **_: Any) -> Any:
        answer = self.answers[method]
        if isinstance(answer, Exception):
            raise answer
        return answer


def facade(**answers: Any) -> tuple[FleetExecution, FleetJudge]:
    router = Answers(**answers)
    admission = Admission(FleetConfig(), router.require_healthy)
    admission.scheduler.set_capacity(1)
    policies = load_policy_dir(DEFAULT_POLICIES_DIR)
    execution = FleetExecution(
        router,  # type: ignore[arg-type]
        admission,
        policies,
        lambda name: name,
        FleetPool(router),  # type: ignore[arg-type]
    )
    return execution, FleetJudge(execution)


@pytest.mark.parametrize(
    ("answer", "failure"),
    [
        ((None, ExecResult(status=ExecStatus.OK)), None),
        ((None, ExecResult(status=ExecStatus.NONZERO_EXIT, exit_code=1)), "user"),
        ((ExecResult(status=ExecStatus.NONZERO_EXIT), None), "user"),  # the build failed
        (ContainerLostError("lost twice"), "infra"),
    ],
    ids=["ok", "nonzero exit", "compile error", "hosts lost"],
)
async def test_a_run_through_the_fleet_notes_how_it_ended(answer: Any, failure: str) -> None:
    execution, _ = facade(run_program=answer)
    call, token = context.begin("req-1")
    try:
        await execution.run(RunRequest(code="print(1)"), tenant="alice")
    finally:
        context.end(token)
    assert call.failure == failure


@pytest.mark.parametrize(
    ("answer", "failure"),
    [(FAILED, "user"), (ContainerLostError("lost twice"), "infra")],
    ids=["wrong answer", "hosts lost"],
)
async def test_a_judgement_through_the_fleet_notes_how_it_ended(answer: Any, failure: str) -> None:
    _, judge = facade(judge=answer)
    request = JudgeRequest.model_validate(
        {"code": "print(1)", "tests": {"kind": "io", "cases": [{"expected_stdout": "1\n"}]}}
    )
    call, token = context.begin("req-1")
    try:
        await judge.judge(request, tenant="alice")
    finally:
        context.end(token)
    assert call.failure == failure
