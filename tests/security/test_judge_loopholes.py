"""Two reward hacks of the judge's Python kinds (issue 12, items 1 and 3), attacked for real.

1. The candidate's process exiting, crashing or timing out is not "raised an
   exception": a test expecting one (``except Exception``, ``pytest.raises``,
   even a bare ``except:``) fails as a runtime error or a timeout, and so does
   the submission.
2. ``from solution import *`` in a hidden test gives the test only the
   candidate's own public names: never one the test bound itself, never a
   builtin's name. An honest star import (no ``__all__``) gets the functions.

Every attack runs under runc and runsc (gVisor), on a real pool container, with
a positive control that gets 1.0 in the same setup.
"""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.core.pool import Pool
from sandbox.judge.judge import Judge, JudgeRequest, JudgeResult
from sandbox.policy import Policy
from tests.conftest import judge_on, make_policy

pytestmark = pytest.mark.docker

TENANT = "judge-loopholes"
WALL_S = 6.0
CALL_TIMEOUT_S = 1.0


@pytest.fixture(scope="module", params=["runc", "runsc"])
def policy(request: pytest.FixtureRequest) -> Policy:
    return make_policy(
        f"judge-loopholes-{request.param}",
        runtime=request.param,
        resources={"cpus": 1.0, "memory_mb": 256, "pids": 64, "wall_time_s": WALL_S},
        env={"set": {"TEST_POOL_GROUP": f"judge-loopholes-{request.param}"}},
        pool={"warm": 0, "max": 1},
    )


@pytest.fixture(scope="module")
def judge(pool: Pool, policy: Policy) -> Judge:
    return judge_on(pool, policy)


async def judged(judge: Judge, code: str, tests: dict[str, Any], **extra: Any) -> JudgeResult:
    request = JudgeRequest.model_validate({"code": code, "tests": tests, **extra})
    return await judge.judge(request, tenant=TENANT)


# ---------------------------------------------------------------- 1. death is not an exception

# The task: ``isqrt(n)``, which must raise for a negative ``n``.
HONEST = "import math\n\n\ndef isqrt(n):\n    return math.isqrt(n)\n"
NO_RAISE = "def isqrt(n):\n    return 0 if n < 0 else int(n**0.5)\n"
ENDINGS = {
    "os._exit(0)": "import os\n\n\ndef isqrt(n):\n    if n < 0:\n        os._exit(0)\n"
    "    return int(n**0.5)\n",
    "raise SystemExit(0)": "def isqrt(n):\n    if n < 0:\n        raise SystemExit(0)\n"
    "    return int(n**0.5)\n",
    "raise KeyboardInterrupt": "def isqrt(n):\n    if n < 0:\n        raise KeyboardInterrupt\n"
    "    return int(n**0.5)\n",
    "an exception that is also a SystemExit": "class Out(SystemExit, ValueError):\n    pass\n\n\n"
    "def isqrt(n):\n    if n < 0:\n        raise Out(0)\n    return int(n**0.5)\n",
    "sleeps past the limit": "import time\n\n\ndef isqrt(n):\n    if n < 0:\n"
    "        time.sleep(3600)\n    return int(n**0.5)\n",
}
VERDICT = {name: "runtime_error" for name in ENDINGS} | {"sleeps past the limit": "timeout"}

# How a test says "this must raise", in each kind.
CATCHERS = {
    ("assert", "except Exception"): "try:\n    candidate(-1)\nexcept Exception:\n    pass\n"
    "else:\n    assert False, 'no exception'\n",
    ("assert", "bare except"): "try:\n    candidate(-1)\nexcept:\n    pass\n"
    "else:\n    assert False, 'no exception'\n",
    ("files", "pytest.raises(Exception)"): "with pytest.raises(Exception):\n"
    "    solution.isqrt(-1)\n",
    ("files", "pytest.raises(BaseException)"): "with pytest.raises(BaseException):\n"
    "    solution.isqrt(-1)\n",
}


def _indent(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.splitlines())


def raising_tests(kind: str, catcher: str) -> dict[str, Any]:
    """A test of a plain value, then one that the call must raise."""
    body = CATCHERS[(kind, catcher)]
    if kind == "assert":
        script = f"def check(candidate):\n    assert candidate(16) == 4\n{_indent(body)}"
        return {"kind": "assert", "entry_point": "isqrt", "script": script}
    text = (
        "import pytest\n\nimport solution\n\n\ndef test_value():\n"
        "    assert solution.isqrt(16) == 4\n\n\n"
        f"def test_negative_raises():\n{_indent(body)}"
    )
    return {"kind": "files", "files": {"test_isqrt.py": text}}


@pytest.mark.parametrize(("kind", "catcher"), sorted(CATCHERS))
async def test_controls_of_a_raising_test(judge: Judge, kind: str, catcher: str) -> None:
    honest = await judged(judge, HONEST, raising_tests(kind, catcher))
    assert honest.reward == 1.0, honest
    wrong = await judged(judge, NO_RAISE, raising_tests(kind, catcher))
    # "DID NOT RAISE" is pytest's own failure: a runtime error, not an assert's wrong answer
    assert wrong.reward == 0.0 and wrong.error_class in ("wrong_answer", "runtime_error"), wrong


@pytest.mark.parametrize("ending", sorted(ENDINGS))
@pytest.mark.parametrize(("kind", "catcher"), sorted(CATCHERS))
async def test_candidate_ending_is_not_an_exception(
    judge: Judge, kind: str, catcher: str, ending: str
) -> None:
    result = await judged(
        judge, ENDINGS[ending], raising_tests(kind, catcher), test_timeout_s=CALL_TIMEOUT_S
    )
    assert result.reward == 0.0, result
    assert result.error_class == VERDICT[ending], result
    verdicts = [t.verdict.value for t in result.tests]
    assert verdicts[0] == "passed", result  # the test before it still counts
    assert VERDICT[ending] in verdicts, result


def _swallowed_at_the_end(kind: str) -> dict[str, Any]:
    """Every test passes first; then code outside any test swallows the candidate's end."""
    if kind == "assert":
        script = (
            "def check(candidate):\n    assert candidate(16) == 4\n"
            "    try:\n        candidate(-1)\n    except BaseException:\n        pass\n"
        )
        return {"kind": "assert", "entry_point": "isqrt", "script": script}
    text = (
        "import solution\n\n\ndef test_value():\n    assert solution.isqrt(16) == 4\n\n\n"
        "def teardown_module():\n    try:\n        solution.isqrt(-1)\n"
        "    except BaseException:\n        pass\n"
    )
    return {"kind": "files", "files": {"test_isqrt.py": text}}


@pytest.mark.parametrize("kind", ["assert", "files"])
async def test_an_ending_no_test_saw_still_fails_the_submission(judge: Judge, kind: str) -> None:
    honest = await judged(judge, HONEST, _swallowed_at_the_end(kind))
    assert honest.reward == 1.0, honest
    result = await judged(judge, ENDINGS["os._exit(0)"], _swallowed_at_the_end(kind))
    assert result.reward == 0.0 and result.error_class == "runtime_error", result


async def test_function_cases_after_an_exit_fail(judge: Judge) -> None:
    cases = [{"args": [16], "expected": 4}, {"args": [-1], "expected": None}]
    tests = {"kind": "function", "entry_point": "isqrt", "cases": cases}
    code = "def isqrt(n):\n    if n < 0:\n        raise SystemExit(0)\n    return int(n**0.5)\n"
    result = await judged(judge, code, tests, reward="fraction")
    assert result.reward == 0.5 and result.error_class == "runtime_error", result


# ---------------------------------------------------------------- 2. star imports of the candidate

STAR_TESTS = """\
import math
from solution import *


def test_root():
    assert isqrt(16) == math.isqrt(16)


def test_sorted():
    assert sorted(roots([16, 9])) == [3, 4]
"""
ROOTS = "def roots(xs):\n    return [isqrt(x) for x in xs]\n"
STAR_HONEST = {
    "no __all__": f"import math\n\n\ndef isqrt(n):\n    return math.isqrt(n)\n\n\n{ROOTS}",
    "__all__": "import math\n\n__all__ = ['isqrt', 'roots']\n\n\ndef isqrt(n):\n"
    f"    return math.isqrt(n)\n\n\n{ROOTS}",
}
SHADOWS = """\
__all__ = ["isqrt", "roots", "math", "sorted"]


class _Anything:
    def __getattr__(self, name):
        return lambda *args, **kwargs: 7


math = _Anything()


def isqrt(n):
    return 7


def roots(xs):
    return [0]


def sorted(xs):
    return [3, 4]
"""


@pytest.mark.parametrize("honest", sorted(STAR_HONEST))
async def test_an_honest_star_import_gets_the_candidates_names(judge: Judge, honest: str) -> None:
    tests = {"kind": "files", "files": {"test_roots.py": STAR_TESTS}}
    result = await judged(judge, STAR_HONEST[honest], tests)
    assert result.reward == 1.0 and result.passed == 2, result


async def test_a_star_import_cannot_shadow_the_tests_names(judge: Judge) -> None:
    tests = {"kind": "files", "files": {"test_roots.py": STAR_TESTS}}
    result = await judged(judge, SHADOWS, tests, reward="fraction")
    assert result.reward == 0.0 and result.error_class == "wrong_answer", result
    assert [t.verdict.value for t in result.tests] == ["wrong_answer", "wrong_answer"], result
