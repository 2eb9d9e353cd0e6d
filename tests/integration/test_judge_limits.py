"""The judge at its limits, against real containers.

- A compile that runs past its own limit (``compile_time_s``, lowered by the
  request; SandboxFusion's ``compile_timeout``) is a ``compile_error`` saying so, on
  ``/v1/judge``, ``/v1/run`` and ``/run_code``.
- A language whose toolchain is not in its image is a clear 404 naming the command;
  a language whose image is not built is a 503 naming the image and
  ``sandbox images build``, while the service runs Python without it.
- The judge's own report (every case and the value it returned) and log (pytest's
  output) have caps of their own: a correct submission with many cases, or a
  failing one with many failing tests, is not turned into ``output_limit`` by the
  candidate's output caps.
- An ``Idempotency-Key`` is bound to its batch: another body under it is refused; a
  retry joining a batch still running gets the same lines, its items judged once.
- ``memory_limit`` and ``output_limit`` in C and JavaScript, through ``/v1/judge``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandbox.core.execution import RunRequest
from sandbox.core.pool import Pool
from sandbox.errors import InfrastructureError, NotFoundError, status_and_code
from sandbox.host.images import resolve_image
from sandbox.judge.batches import EvaluateRequest, Evaluator, parse_lines
from sandbox.judge.judge import Judge, JudgeRequest, JudgeResult
from sandbox.languages import LANGUAGES, Language
from sandbox.policy import Policy
from sandbox.service import platform as platform_module
from sandbox.service.platform import Platform, PlatformSettings
from tests.conftest import Service, judge_on, make_policy, metric

pytestmark = pytest.mark.docker

TENANT = "judge-limits-tests"
MiB = 1 << 20

# A valid C++17 program whose build takes minutes: 1000 constant values, each a
# 200,000-step constexpr loop (about half a second of g++ apiece).
SLOW_COMPILE = """\
#include <cstdio>
#include <utility>

constexpr unsigned long long spin(unsigned long long seed) {
    unsigned long long x = seed;
    for (int i = 0; i < 200000; ++i) x = x * 6364136223846793005ULL + i;
    return x;
}
template <unsigned long long K> constexpr unsigned long long value = spin(K);
template <unsigned long long... K>
constexpr unsigned long long mix(std::integer_sequence<unsigned long long, K...>) {
    return (value<K> ^ ...);
}
constexpr unsigned long long all = mix(std::make_integer_sequence<unsigned long long, 1000>{});

int main() {
    std::printf("%llu\\n", all & 1);
    return 0;
}
"""
ONE_CASE_IO = {"kind": "io", "cases": [{"stdin": "", "expected_stdout": "0\n"}]}
TWO_CASES_IO = {
    "kind": "io",
    "cases": [{"expected_stdout": "0\n", "weight": 2}, {"expected_stdout": "0\n"}],
}
COMPILE_LIMIT_S = 1.0


@pytest.fixture(scope="module")
def policy() -> Policy:
    return make_policy(
        "judge-limits",
        resources={
            "cpus": 1.0,
            "memory_mb": 256,
            "pids": 64,
            "wall_time_s": 30.0,
            "cpu_time_s": 30.0,
            "compile_time_s": 30.0,
            "stdout_bytes": MiB,
            "stderr_bytes": 64 * 1024,
        },
        env={"set": {"TEST_POOL_GROUP": "judge-limits"}},
        pool={"warm": 0, "max": 2},
    )


@pytest.fixture(scope="module")
def judge(pool: Pool, policy: Policy) -> Judge:
    return judge_on(pool, policy)


async def run(judge: Judge, code: str, tests: dict[str, Any], **extra: Any) -> JudgeResult:
    request = JudgeRequest.model_validate({"code": code, "tests": tests, **extra})
    return await judge.judge(request, tenant=TENANT)


def verdicts(result: JudgeResult | dict[str, Any]) -> list[str]:
    if isinstance(result, JudgeResult):
        return [test.verdict.value for test in result.tests]
    return [test["verdict"] for test in result["tests"]]


# ------------------------------------------------------------------------ 1. compile time


async def test_a_compile_past_its_limit_is_a_compile_error(judge: Judge) -> None:
    started = time.monotonic()
    result = await run(
        judge,
        SLOW_COMPILE,
        TWO_CASES_IO,
        language="cpp",
        limits={"compile_time_s": COMPILE_LIMIT_S},
    )
    elapsed = time.monotonic() - started
    assert verdicts(result) == ["compile_error", "compile_error"], result
    assert (result.reward, result.error_class, result.passed) == (0.0, "compile_error", 0)
    output = result.compile_output or ""
    assert output.startswith("compilation exceeded its time limit of 1 s"), output
    assert elapsed < 15, f"the compile was not stopped at its limit: {elapsed:.1f} s"


def test_a_compile_past_its_limit_over_http(http: httpx.Client) -> None:
    limits = {"compile_time_s": COMPILE_LIMIT_S}
    body = {"language": "cpp", "code": SLOW_COMPILE, "tests": ONE_CASE_IO, "limits": limits}
    response = http.post("/v1/judge", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert (result["reward"], result["error_class"]) == (0.0, "compile_error"), result
    assert verdicts(result) == ["compile_error"]
    assert "compilation exceeded its time limit of 1 s" in result["compile_output"], result

    response = http.post(
        "/v1/run", json={"language": "cpp", "code": SLOW_COMPILE, "limits": limits}
    )
    assert response.status_code == 200, response.text
    ran = response.json()
    assert ran["status"] == "compile_error", ran
    assert ran["reason"] == "compile_time", ran
    assert "compilation exceeded its time limit of 1 s" in ran["stderr"], ran

    body = {"language": "cpp", "code": SLOW_COMPILE, "compile_timeout": COMPILE_LIMIT_S}
    response = http.post("/run_code", json=body)
    assert response.status_code == 200, response.text
    fusion = response.json()
    assert fusion["status"] == "Failed", fusion
    assert fusion["compile_result"]["status"] == "TimeLimitExceeded", fusion
    assert fusion["compile_result"]["execution_time"] < 10, fusion
    assert fusion["run_result"] is None, fusion


# ------------------------------------------------------------------------ 2. missing toolchain

# Languages whose toolchain the python image lacks (the shipped languages all have theirs).
FORTRAN = Language(
    "fortran-test",
    image="python",
    source_file="main.f90",
    compile=("gfortran", "-o", "main", "main.f90"),
    run=("./main",),
)
RUBY = Language("ruby-test", image="python", source_file="main.rb", run=("ruby", "main.rb"))


@pytest.mark.parametrize(
    ("language", "command"),
    [(FORTRAN, "gfortran"), (RUBY, "ruby")],
    ids=["compiled", "interpreted"],
)
async def test_a_missing_toolchain_is_a_clear_error(
    judge: Judge, monkeypatch: pytest.MonkeyPatch, language: Language, command: str
) -> None:
    monkeypatch.setitem(LANGUAGES, language.name, language)

    with pytest.raises(NotFoundError) as judged:
        await run(judge, "print 1", ONE_CASE_IO, language=language.name)
    assert f"{command!r} is not installed" in str(judged.value), judged.value
    assert status_and_code(judged.value) == (404, "not_found")

    with pytest.raises(NotFoundError, match=f"{command!r} is not installed"):
        await judge.execution.run(RunRequest(language=language.name, code="print 1"), tenant=TENANT)

    # In a batch, the item's line carries the error; the others are judged.
    evaluator = Evaluator(judge)
    items = [
        {"code": "print 1", "language": language.name, "tests": ONE_CASE_IO},
        {"code": "print(0)", "tests": ONE_CASE_IO},
    ]
    lines = [line async for line in evaluator.start(EvaluateRequest(items=items), tenant=TENANT)]
    (broken, fine), summary = parse_lines(lines)
    assert broken.result is None and broken.error is not None, broken
    assert broken.error["code"] == "not_found" and command in broken.error["message"], broken
    assert fine.result is not None and fine.result.reward == 1.0, fine
    assert (summary.judged, summary.errors, summary.infra_errors) == (1, 1, 0), summary

    # The sandbox is still good for the next submission.
    assert (await run(judge, "print(0)", ONE_CASE_IO)).reward == 1.0


def test_a_missing_test_runner_over_http(http: httpx.Client) -> None:
    """A command test naming a runner the image lacks: 404 naming it, never a 500 or infra."""
    tests = {
        "kind": "command",
        "files": {"test_main.f90": "program t\nend program t\n"},
        "command": ["gfortran", "test_main.f90"],
        "report": "tap",
    }
    response = http.post("/v1/judge", json={"code": "print(1)", "tests": tests})
    assert response.status_code == 404, response.text
    error = response.json()
    assert error["code"] == "not_found", error
    assert "'gfortran' is not installed" in error["message"], error
    # The service is fine afterwards.
    response = http.post("/v1/judge", json={"code": "print(0)", "tests": ONE_CASE_IO})
    assert response.status_code == 200 and response.json()["reward"] == 1.0, response.text


# ------------------------------------------------------------------------ 2. missing image


@pytest.fixture
def without_polyglot(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The platform sees every image but polyglot as built (no real image is touched)."""

    def resolve(name: str, base: str | None = None) -> str:
        if name == "python":
            return resolve_image(name, base)
        raise NotFoundError(f"image sandbox-{name}:test is not built; run `sandbox images build`")

    monkeypatch.setattr(platform_module, "resolve_image", resolve)
    monkeypatch.setattr(Platform, "IMAGE_RECHECK_S", 0.0)
    yield


C_ZERO = '#include <stdio.h>\nint main(void) { puts("0"); return 0; }\n'


async def test_the_service_starts_and_runs_python_without_the_polyglot_image(
    without_polyglot: None, policy: Policy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = PlatformSettings(warm=["default"], audit_path=tmp_path / "audit.db")
    platform = Platform(settings, policies={"default": policy})
    await platform.start()
    try:
        assert "python" in platform.images and "polyglot" not in platform.images
        python = JudgeRequest(code="print(0)", tests=ONE_CASE_IO)  # type: ignore[arg-type]
        assert (await platform.judge.judge(python, tenant=TENANT)).reward == 1.0

        c_item = {"code": C_ZERO, "language": "c", "tests": ONE_CASE_IO}
        with pytest.raises(InfrastructureError) as judged:
            await platform.judge.judge(JudgeRequest.model_validate(c_item), tenant=TENANT)
        assert status_and_code(judged.value) == (503, "infrastructure_error")
        message = str(judged.value)
        assert "'c'" in message and "polyglot" in message, message
        assert "sandbox images build" in message, message

        with pytest.raises(InfrastructureError, match="sandbox images build"):
            await platform.execution.run(RunRequest(language="c", code=C_ZERO), tenant=TENANT)
        with pytest.raises(InfrastructureError, match=r"items\[1\].*polyglot"):
            platform.evaluator.start(
                EvaluateRequest.model_validate({"items": [python.model_dump(), c_item]}),
                tenant=TENANT,
            )

        # Built later, the image is found without a restart.
        monkeypatch.setattr(platform_module, "resolve_image", resolve_image)
        result = await platform.judge.judge(JudgeRequest.model_validate(c_item), tenant=TENANT)
        assert result.reward == 1.0, result
        assert "polyglot" in platform.images
    finally:
        await platform.close()


async def test_python_is_still_required_at_start(
    monkeypatch: pytest.MonkeyPatch, policy: Policy, tmp_path: Path
) -> None:
    def nothing_built(name: str, base: str | None = None) -> str:
        raise NotFoundError(f"image sandbox-{name}:test is not built; run `sandbox images build`")

    monkeypatch.setattr(platform_module, "resolve_image", nothing_built)
    settings = PlatformSettings(warm=[], audit_path=tmp_path / "audit.db")
    with pytest.raises(NotFoundError, match="sandbox-python:test is not built"):
        Platform(settings, policies={"default": policy})


# ------------------------------------------------------------------------ 3. the judge's caps


async def test_many_large_returned_values_do_not_hit_the_candidates_cap(judge: Judge) -> None:
    """3,000 cases returning 1 KB each: a 3 MB report, against a 1 MiB stdout cap that
    only the candidate's own output answers to (it prints nothing)."""
    cases = [{"args": [i], "expected": str(i % 10) * 1024} for i in range(3000)]
    tests = {"kind": "function", "entry_point": "f", "cases": cases}
    code = "def f(i):\n    return str(i % 10) * 1024\n"
    result = await run(judge, code, tests)
    assert (result.reward, result.error_class, result.passed) == (1.0, None, 3000), (
        result.message,
        result.tests[:2],
    )
    wrong_code = "def f(i):\n    return '0' * 1024\n"  # right for one case in ten
    wrong = await run(judge, wrong_code, tests, reward="fraction")
    assert (wrong.passed, wrong.error_class) == (300, "wrong_answer"), wrong.message


async def test_many_failing_pytest_tests_are_wrong_answers(judge: Judge) -> None:
    """300 failing tests: pytest's failure report on the judge's stderr is far past the
    candidate's 64 KiB stderr cap."""
    test = (
        "import pytest\nimport solution\n\n\n"
        "@pytest.mark.parametrize('i', range(300))\n"
        "def test_f(i):\n"
        "    assert solution.f(i) == i, 'a long explanation of what went wrong ' * 20\n"
    )
    result = await run(
        judge, "def f(i):\n    return -1\n", {"kind": "files", "files": {"test_f.py": test}}
    )
    assert result.total == 300, (result.message, result.tests[:2])
    assert set(verdicts(result)) == {"wrong_answer"}, result.tests[:2]
    assert (result.reward, result.error_class) == (0.0, "wrong_answer")


async def test_a_long_tap_report_on_stdout_is_read(judge: Judge) -> None:
    """A command's report on its stdout (2,000 TAP lines, about 200 KB) with the
    candidate's stdout cap lowered to 64 KiB."""
    script = (
        "source ./main.sh\n"
        "echo 1..2000\n"
        "for i in $(seq 1 2000); do\n"
        '  if [ "$(add "$i" 1)" = "$((i + 1))" ]; then r=ok; else r="not ok"; fi\n'
        '  echo "$r $i - add($i, 1) gives $((i + 1)), checked by a test with a long name"\n'
        "done\n"
    )
    tests = {
        "kind": "command",
        "files": {"run_tests.sh": script},
        "command": ["bash", "run_tests.sh"],
        "report": "tap",
    }
    code = "add() { echo $(($1 + $2)); }\n"
    result = await run(judge, code, tests, language="bash", limits={"stdout_bytes": 64 * 1024})
    assert (result.reward, result.passed, result.total) == (1.0, 2000, 2000), result.message


async def test_the_candidates_own_output_still_has_its_cap(judge: Judge) -> None:
    code = "import sys\nsys.stdout.write('y' * (80 * 1024))\n"
    tests = {"kind": "io", "cases": [{"expected_stdout": "y" * (80 * 1024)}]}
    result = await run(judge, code, tests, limits={"stdout_bytes": 64 * 1024})
    assert verdicts(result) == ["output_limit"], result


# ------------------------------------------------------------------------ 4. idempotency


def ndjson(response: httpx.Response) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    assert response.status_code == 200, response.text
    lines = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    assert lines and lines[-1].get("done") is True, lines
    return sorted(lines[:-1], key=lambda line: line["index"]), lines[-1]


def square_items(sleep_s: float = 0.0, count: int = 2) -> list[dict[str, Any]]:
    code = f"import time\ntime.sleep({sleep_s})\nx = int(input())\nprint(x * x)\n"
    return [
        {
            "id": f"sq{i}",
            "code": code,
            "tests": {
                "kind": "io",
                "cases": [{"stdin": f"{i}\n", "expected_stdout": f"{i * i}\n"}],
            },
        }
        for i in range(count)
    ]


def test_another_body_under_the_same_key_is_refused(http: httpx.Client) -> None:
    key = f"judge-limits-{time.time_ns()}"
    body = {"items": square_items()}
    first_items, first = ndjson(
        http.post("/v1/evaluate", json=body, headers={"Idempotency-Key": key})
    )
    assert first["replayed"] is False and first["all_passed"] == 2, first

    changed = {"items": square_items()[:1]}
    response = http.post("/v1/evaluate", json=changed, headers={"Idempotency-Key": key})
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["code"] == "invalid_request", error
    assert "Idempotency-Key" in error["message"] and "different" in error["message"], error
    # The key as a field is the same key.
    response = http.post("/v1/evaluate", json={**changed, "idempotency_key": key})
    assert response.status_code == 422, response.text

    # The same batch again (key in the field this time, another concurrency) replays.
    again_items, again = ndjson(
        http.post("/v1/evaluate", json={**body, "idempotency_key": key, "concurrency": 1})
    )
    assert again["replayed"] is True, again
    assert again_items == first_items


def judgements(http: httpx.Client) -> float:
    return metric(http.get("/metrics").text, "sandbox_judgements_total")


def test_a_retry_joining_a_running_batch_gets_the_same_lines(
    http: httpx.Client, service: Service
) -> None:
    key = f"judge-limits-join-{time.time_ns()}"
    body = {"items": square_items(sleep_s=1.5, count=3), "concurrency": 1}
    before = judgements(http)
    first_lines: list[str] = []
    first_done: list[float] = []
    first_started = threading.Event()

    def first_request() -> None:
        with httpx.Client(base_url=service.url, timeout=60) as client:
            headers = {"Idempotency-Key": key}
            with client.stream("POST", "/v1/evaluate", json=body, headers=headers) as response:
                assert response.status_code == 200
                for line in response.iter_lines():
                    if line.strip():
                        first_lines.append(line)
                        first_started.set()
        first_done.append(time.monotonic())

    thread = threading.Thread(target=first_request)
    thread.start()
    try:
        assert first_started.wait(30), "the first batch produced nothing"
        retried_at = time.monotonic()
        second = http.post("/v1/evaluate", json=body, headers={"Idempotency-Key": key})
    finally:
        thread.join(60)
    assert first_done and retried_at < first_done[0], "the batch had finished before the retry"
    second_items, second_summary = ndjson(second)
    first_parsed = [json.loads(line) for line in first_lines]
    first_items = sorted(first_parsed[:-1], key=lambda line: line["index"])
    assert second_items == first_items
    assert [i["result"]["reward"] for i in first_items] == [1.0, 1.0, 1.0], first_items
    assert first_parsed[-1]["replayed"] is False
    assert second_summary["replayed"] is True
    assert {**second_summary, "replayed": False} == first_parsed[-1]
    assert judgements(http) - before == 3, "the items were judged more than once"


# ------------------------------------------------------------------------ 5. limits outside Python

C_MEMORY = """\
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
    static char *blocks[1 << 16];
    unsigned long total = 0;
    for (size_t n = 0; n < (1 << 16); n++) {
        blocks[n] = malloc(8 << 20);
        if (blocks[n] == NULL) { puts("malloc failed"); return 1; }
        memset(blocks[n], (int)n, 8 << 20);
        total += (unsigned char)blocks[n][n % (8 << 20)];
    }
    printf("%lu\\n", total);
    return 0;
}
"""
C_OUTPUT = """\
#include <stdio.h>
#include <string.h>
int main(void) {
    static char line[4097];
    memset(line, 'y', 4096);
    for (;;) fputs(line, stdout);
}
"""
JS_MEMORY = """\
const blocks = [];
for (;;) blocks.push(Buffer.alloc(8 << 20, blocks.length % 256));
"""
JS_OUTPUT = """\
const fs = require("fs");
const line = "y".repeat(4096);
for (;;) fs.writeSync(1, line);
"""
LIMIT_PROGRAMS = {
    ("c", "memory_limit"): C_MEMORY,
    ("c", "output_limit"): C_OUTPUT,
    ("javascript", "memory_limit"): JS_MEMORY,
    ("javascript", "output_limit"): JS_OUTPUT,
}


@pytest.mark.parametrize(
    ("language", "verdict"),
    sorted(LIMIT_PROGRAMS),
    ids=["/".join(k) for k in sorted(LIMIT_PROGRAMS)],
)
def test_memory_and_output_limits_outside_python(
    http: httpx.Client, language: str, verdict: str
) -> None:
    # A memory hog is judged on one case: two of them at once in one container, under runc,
    # can keep the cgroup reclaiming the page cache near its limit until the wall time runs
    # out before the OOM killer acts (seen once in CI under load: "timeout" for the second).
    cases = [{"expected_stdout": "1\n"}] + (
        [] if verdict == "memory_limit" else [{"expected_stdout": "2\n"}]
    )
    tests = {"kind": "io", "cases": cases}
    body = {"language": language, "code": LIMIT_PROGRAMS[(language, verdict)], "tests": tests}
    response = http.post("/v1/judge", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert verdicts(result) == [verdict] * len(cases), result
    assert (result["reward"], result["error_class"]) == (0.0, verdict), result
