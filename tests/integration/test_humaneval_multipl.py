"""HumanEval in eight more languages (tests/data/humaneval_multipl), judged by the real service.

Each record is a MultiPL-E-style translation of one HumanEval problem: a prompt
(the signature with the docstring as a comment), a canonical solution, the
tests (HumanEval's asserts in the language's own idiom; the program exits
non-zero at the first failure) and the same tests as a printing driver with the
expected output. Every canonical solution passes, through ``/v1/evaluate`` (io
tests with the printing driver, compared outside the sandbox) and through
``/run_code`` (SandboxFusion's shape: prompt, solution and asserts as one
program); the same solution with its body replaced by one returning a null
value fails in both; and most of its off-by-one mutants fail, so the
translated tests are not vacuous. The asserts as a driver, whose only evidence
would be the exit status of the candidate's own process, are refused.

To keep the time small, ``/run_code`` takes every fifth problem of each
language, and the null bodies and mutants of the languages that build each
program first (TypeScript, Racket, D), whose tests compare with the language's
own structural equality, are judged on that sample or not at all.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.evaluate_http import evaluate

pytestmark = pytest.mark.docker

DATA = Path(__file__).resolve().parent.parent / "data" / "humaneval_multipl"
# Our language name -> the name SandboxFusion's datasets send to /run_code.
FUSION_NAMES = {
    "php": "php",
    "ruby": "ruby",
    "lua": "lua",
    "perl": "perl",
    "r": "R",
    "racket": "racket",
    "typescript": "typescript",
    "d": "D",
}
# A body returning a null value (the signature's closing included), per language.
NULL_BODY = {
    "php": "    return null;\n}\n",
    "ruby": "  nil\nend\n",
    "lua": "  return nil\nend\n",
    "perl": "    return undef;\n}\n",
    "r": "  NULL\n}\n",
    "racket": "  #f)\n",
    "typescript": "    return null as any;\n}\n",
    "d": "    return typeof(return).init;\n}\n",
}
# The interpreted languages: TypeScript, Racket and D build each program first, which
# takes several seconds on a loaded 2-core host.
QUICK = ("php", "ruby", "lua", "perl", "r")
PROBLEMS = [
    json.loads(line)
    for language in FUSION_NAMES
    for line in (DATA / f"{language}.jsonl").read_text().splitlines()
]
# Every fifth problem of each language.
SAMPLE = [p for p in PROBLEMS if int(p["task_id"].split("/")[1]) % 5 == 0]
# The null bodies judged: every problem in the quick languages, the sample in the others.
CHECKED_BROKEN = [p for p in PROBLEMS if p["language"] in QUICK or p in SAMPLE]


def program(problem: dict[str, Any], body: str) -> str:
    return problem["prompt"] + body


def item(problem: dict[str, Any], body: str, tag: str) -> dict[str, Any]:
    return {
        "id": f"{problem['language']}/{problem['task_id']}/{tag}",
        "language": problem["language"],
        "code": program(problem, body),
        "tests": {
            "kind": "io",
            "driver": problem["driver"],
            "compare": "float",
            "float_abs_tol": 1e-6,
            "cases": [
                {"name": "tests", "stdin": "", "expected_stdout": problem["expected_stdout"]}
            ],
        },
        "test_timeout_s": 10,
    }


def run_code(http: httpx.Client, problem: dict[str, Any], body: str) -> dict[str, Any]:
    """One program (prompt, body, tests) through SandboxFusion's /run_code."""
    response = http.post(
        "/run_code",
        json={
            "code": program(problem, body) + "\n" + problem["tests"],
            "language": FUSION_NAMES[problem["language"]],
            "compile_timeout": 60,
            "run_timeout": 10,
        },
        timeout=120,
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def off_by_one(body: str) -> str | None:
    """The body with its first integer literal increased by one (None without one)."""
    match = re.search(r"(?<![\w.$])(\d+)(?![\w.])", body)
    if match is None:
        return None
    return body[: match.start()] + str(int(match.group(1)) + 1) + body[match.end() :]


def test_the_data_covers_eight_languages_and_twenty_two_problems() -> None:
    by_language: dict[str, set[str]] = {}
    for problem in PROBLEMS:
        by_language.setdefault(problem["language"], set()).add(problem["task_id"])
    assert set(by_language) == set(FUSION_NAMES)
    assert all(tasks == {f"HumanEval/{n}" for n in range(22)} for tasks in by_language.values())


def test_every_canonical_solution_passes_through_evaluate(http: httpx.Client) -> None:
    items = [item(p, p["canonical_solution"], "canonical") for p in PROBLEMS]
    results = evaluate(http, items, concurrency=8, timeout_s=900)
    failed = {key: result for key, result in results.items() if result["reward"] != 1.0}
    assert not failed, json.dumps(failed, indent=1)[:4000]
    assert len(results) == len(PROBLEMS) == 22 * len(FUSION_NAMES)


def test_null_bodies_fail_through_evaluate(http: httpx.Client) -> None:
    items = [item(p, NULL_BODY[p["language"]], "null") for p in CHECKED_BROKEN]
    results = evaluate(http, items, concurrency=8, timeout_s=900)
    passed = sorted(key for key, result in results.items() if result["reward"] != 0.0)
    assert not passed, passed
    # Failed by the tests (a wrong value, a runtime error or a compile error), never by the
    # service.
    failures = ("wrong_answer", "runtime_error", "compile_error")
    assert all(r["error_class"] in failures for r in results.values()), results


# Bodies that never return: they end the program with status 0 from inside the function,
# before the driver's first assert fails (what a policy trained on these rewards finds
# first), or make the failure that ends it exit 0.
EXIT_ZERO_BODIES = {
    "exit": {"php": "    exit(0);\n}\n", "ruby": "  exit 0\nend\n"},
    "exit-on-failure": {
        "php": "    register_shutdown_function(function () { exit(0); });\n    return null;\n}\n",
        "ruby": "  at_exit { exit! 0 }\n  nil\nend\n",
    },
}


def test_a_body_that_exits_zero_gets_no_reward(http: httpx.Client) -> None:
    """The driver runs in the candidate's process, so its exit status proves nothing: the
    evidence is the values it prints, compared outside the sandbox with expected ones."""
    items = [
        item(p, bodies[p["language"]], attack)
        for attack, bodies in EXIT_ZERO_BODIES.items()
        for p in SAMPLE
        if p["language"] in bodies and p["task_id"].endswith("0")
    ]
    results = evaluate(http, items, concurrency=4, timeout_s=300)
    assert len(results) == 4 * 3
    rewarded = sorted(key for key, result in results.items() if result["reward"] != 0.0)
    assert not rewarded, rewarded
    for result in results.values():
        assert result["error_class"] == "wrong_answer", result


# What a driver in the candidate's process cannot stop, and a printing driver need not:
# code that reads its own program (the driver, any mark in it) and prints it, or that
# disables the asserts' way of failing (Ruby's `raise`).
SAME_PROCESS_BODIES = {
    "prints its own program": "  STDOUT.write(File.read(__FILE__))\n  exit 0\nend\n",
    "disables raise": "  nil\nend\nmodule Kernel\n  def raise(*) = nil\nend\n",
}


@pytest.mark.parametrize("attack", sorted(SAME_PROCESS_BODIES))
def test_a_same_process_attack_gets_no_reward(http: httpx.Client, attack: str) -> None:
    problem = next(p for p in PROBLEMS if p["language"] == "ruby")
    result = evaluate(http, [item(problem, SAME_PROCESS_BODIES[attack], "attack")], concurrency=1)
    assert next(iter(result.values()))["reward"] == 0.0


def test_most_off_by_one_mutants_fail(http: httpx.Client) -> None:
    mutants = [
        item(p, mutant, "off_by_one")
        for p in PROBLEMS
        if p["language"] in QUICK and (mutant := off_by_one(p["canonical_solution"])) is not None
    ]
    results = evaluate(http, mutants, concurrency=8, timeout_s=900)
    for language in QUICK:
        judged = [k for k in results if k.startswith(f"{language}/")]
        survived = [k for k in judged if results[k]["reward"] != 0.0]
        # A mutant may be equivalent on these tests (a loop that may start one later,
        # a map's value never read); few are (this run's survivors were read: all are).
        assert len(judged) >= 8 and len(survived) <= len(judged) // 4, (language, survived)


def test_run_code_passes_canonical_and_fails_null_bodies(http: httpx.Client) -> None:
    jobs = [(p, p["canonical_solution"], True) for p in SAMPLE]
    jobs += [(p, NULL_BODY[p["language"]], False) for p in SAMPLE]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda job: run_code(http, job[0], job[1]), jobs))
    wrong = []
    for (problem, _, should_pass), answer in zip(jobs, answers, strict=True):
        # Failed by the program, never by the sandbox (SandboxFusion's SandboxError).
        assert answer["status"] in ("Success", "Failed"), answer
        passed = answer["status"] == "Success" and answer["run_result"]["return_code"] == 0
        if passed != should_pass:
            wrong.append((problem["language"], problem["task_id"], should_pass, answer))
    assert not wrong, json.dumps(wrong, indent=1)[:4000]


def test_the_asserts_as_a_driver_are_refused(http: httpx.Client) -> None:
    """MultiPL-E's asserts as an io driver, nothing to compare: a candidate's code in the same
    process can end it with status 0 whatever the asserts say. Refused (422) before anything
    runs, in every language here, naming what to write instead."""
    for language in FUSION_NAMES:
        problem = next(p for p in PROBLEMS if p["language"] == language)
        body = item(problem, problem["canonical_solution"], "silent")
        body["tests"] = {
            "kind": "io",
            "driver": problem["tests"],
            "cases": [{"stdin": "", "expected_stdout": ""}],
        }
        response = http.post("/v1/judge", json=body, timeout=60)
        assert response.status_code == 422, (language, response.text)
        assert "put them in expected_stdout" in response.json()["message"], response.text
