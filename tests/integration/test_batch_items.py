"""Every item of a batch gets exactly one line, whatever happens to another item.

A real judge on real containers, with one fault injected: the item called ``boom``
fails in a way nobody foresaw (not a :class:`~sandbox.errors.SandboxError`). The
items around it must still be judged and answered, the faulty one must get an
``internal_error`` line, and the summary, last, must count all three.
"""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.core.execution import ExecutionService
from sandbox.core.pool import Pool
from sandbox.host.images import resolve_image
from sandbox.judge.batches import EvaluateRequest, Evaluator, parse_lines
from sandbox.judge.judge import Judge, JudgeRequest, JudgeResult
from tests.conftest import make_policy

pytestmark = pytest.mark.docker

TESTS = {"kind": "function", "entry_point": "square", "cases": [{"args": [3], "expected": 9}]}
SQUARE = "def square(x):\n    return x * x\n"


class FaultyJudge(Judge):
    """The real judge, except for the item whose id is ``boom``."""

    async def judge(self, request: JudgeRequest, *, tenant: str) -> JudgeResult:
        if request.id == "boom":
            raise RuntimeError("a fault nobody foresaw")
        return await super().judge(request, tenant=tenant)


async def test_an_unexpected_fault_in_one_item_costs_the_others_nothing(pool: Pool) -> None:
    judge = FaultyJudge(ExecutionService(pool, {"default": make_policy()}, resolve_image))
    items: list[dict[str, Any]] = [
        {"id": "first", "code": SQUARE, "tests": TESTS},
        {"id": "boom", "code": SQUARE, "tests": TESTS},
        {"id": "last", "code": SQUARE, "tests": TESTS},
    ]
    request = EvaluateRequest.model_validate({"items": items, "concurrency": 3})
    lines = [line async for line in Evaluator(judge).start(request, tenant="batch-items-tests")]

    assert len(lines) == 4, lines  # one line per item, then the summary
    (first, boom, last), summary = parse_lines(lines)
    assert [line.id for line in (first, boom, last)] == ["first", "boom", "last"]
    for good in (first, last):
        assert good.error is None and good.result is not None and good.result.reward == 1.0, good
    assert boom.result is None and boom.error is not None, boom
    assert boom.error["code"] == "internal_error", boom.error
    assert "nobody foresaw" not in boom.error["message"]  # no internals in an answer
    assert (summary.items, summary.judged, summary.errors) == (3, 2, 1), summary
