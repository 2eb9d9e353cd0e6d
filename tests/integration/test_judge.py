"""The judge end to end: verdicts, rewards, values, pytest files, comparisons, batches, compat.

Library tests use :class:`sandbox.judge.Judge` on the session pool with a small
policy of their own; service tests go through ``sandbox serve`` over loopback
HTTP (``/v1/judge``, ``/v1/evaluate``, ``/get_reward``, ``/run_code``). Every
verdict asserted here comes from code really running in a container.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import docker
import httpx
import pytest

from sandbox.backends.docker import LABEL_POLICY
from sandbox.core.execution import ExecutionService
from sandbox.core.pool import Pool
from sandbox.errors import InvalidRequestError
from sandbox.host.images import resolve_image
from sandbox.judge.judge import Judge, JudgeRequest, JudgeResult
from sandbox.policy import Policy
from tests.conftest import judge_on, make_policy

pytestmark = pytest.mark.docker

TENANT = "judge-tests"
WALL_S = 4.0
STDOUT_CAP = 16 * 1024


@pytest.fixture(scope="module")
def policy() -> Policy:
    return make_policy(
        "judge-tests",
        resources={
            "cpus": 1.0,
            "memory_mb": 192,
            "pids": 64,
            "wall_time_s": WALL_S,
            "cpu_time_s": WALL_S,
            "stdout_bytes": STDOUT_CAP,
            "stderr_bytes": STDOUT_CAP,
        },
        env={"set": {"TEST_POOL_GROUP": "judge-tests"}},
        pool={"warm": 0, "max": 2},
    )


@pytest.fixture(scope="module")
def judge(pool: Pool, policy: Policy) -> Judge:
    return judge_on(pool, policy)


async def run(judge: Judge, code: str, tests: dict[str, Any], **extra: Any) -> JudgeResult:
    request = JudgeRequest.model_validate({"code": code, "tests": tests, **extra})
    return await judge.judge(request, tenant=TENANT)


def verdicts(result: JudgeResult) -> list[str]:
    return [test.verdict.value for test in result.tests]


# ------------------------------------------------------------------------ verdict mapping

# add(a, b), written to fail in one way each; the io variant reads "a b" from stdin.
BEHAVIOUR = {
    "passed": "return a + b",
    "wrong_answer": "return a + b + 1",
    "runtime_error": "raise ValueError('boom')",
    "timeout": "import time; time.sleep(60)",
    "memory_limit": "hoard = [b'x' * (8 << 20) for _ in range(10**6)]",
    "output_limit": "import sys; [sys.stdout.write('y' * 4096) for _ in range(10**6)]",
}


def add_code(body: str) -> str:
    return (
        f"def add(a, b):\n    {body}\n\n\n"
        'if __name__ == "__main__":\n'
        "    a, b = map(int, input().split())\n"
        "    print(add(a, b))\n"
    )


def add_tests(kind: str) -> dict[str, Any]:
    if kind == "io":
        return {"kind": "io", "cases": [{"stdin": "2 3\n", "expected_stdout": "5\n"}]}
    if kind == "function":
        return {
            "kind": "function",
            "entry_point": "add",
            "cases": [{"args": [2, 3], "expected": 5}],
        }
    if kind == "assert":
        script = "def check(candidate):\n    assert candidate(2, 3) == 5\n"
        return {"kind": "assert", "entry_point": "add", "script": script}
    test = "import solution\n\n\ndef test_add():\n    assert solution.add(2, 3) == 5\n"
    return {"kind": "files", "files": {"test_add.py": test}}


VERDICT_CASES = [
    (kind, verdict)
    for kind in ("io", "function", "assert", "files")
    for verdict in BEHAVIOUR
    # Pair mode: the candidate's own stdout goes nowhere, so a flood is just a slow call.
    if not (verdict == "output_limit" and kind != "io")
]


@pytest.mark.parametrize(("kind", "verdict"), VERDICT_CASES)
async def test_verdict_mapping(judge: Judge, kind: str, verdict: str) -> None:
    extra = {"test_timeout_s": 0.5} if verdict == "timeout" else {}
    result = await run(judge, add_code(BEHAVIOUR[verdict]), add_tests(kind), **extra)
    assert verdicts(result) == [verdict], result
    assert result.total == 1
    if verdict == "passed":
        assert (result.reward, result.error_class, result.passed) == (1.0, None, 1)
    else:
        assert (result.reward, result.error_class, result.passed) == (0.0, verdict, 0)


async def test_output_flood_in_pair_mode_times_out(judge: Judge) -> None:
    code = add_code(BEHAVIOUR["output_limit"].replace("10**6", "10**9"))
    result = await run(judge, code, add_tests("function"), test_timeout_s=0.5)
    assert (result.reward, result.error_class) == (0.0, "timeout"), result


@pytest.mark.parametrize("kind", ["function", "assert", "files"])
async def test_python_syntax_error_fails_the_load(judge: Judge, kind: str) -> None:
    result = await run(judge, "def add(a, b)\n    return a + b\n", add_tests(kind))
    assert (result.reward, result.error_class) == (0.0, "runtime_error"), result
    assert "SyntaxError" in (result.message or ""), result


async def test_compile_error_for_a_compiled_language(judge: Judge) -> None:
    tests = {
        "kind": "io",
        "cases": [
            {"stdin": "2 3\n", "expected_stdout": "5\n", "weight": 2},
            {"stdin": "1 1\n", "expected_stdout": "2\n"},
        ],
    }
    result = await run(judge, "int main(void) { return syntax error; }\n", tests, language="c")
    assert verdicts(result) == ["compile_error", "compile_error"], result
    assert (result.reward, result.error_class) == (0.0, "compile_error")
    assert "error" in (result.compile_output or ""), result
    honest = '#include <stdio.h>\nint main(void) { int a, b; scanf("%d %d", &a, &b); '
    honest += 'printf("%d\\n", a + b); return 0; }\n'
    passed = await run(judge, honest, tests, language="c")
    assert (passed.reward, passed.passed) == (1.0, 2), passed


async def test_compiled_function_tests_use_a_driver(judge: Judge) -> None:
    """Function-style tests in C: a driver prints what the function returned; compared here."""
    driver = '#include <stdio.h>\nint main(void) {\n    int a, b;\n    scanf("%d %d", &a, &b);\n'
    driver += '    printf("%d\\n", add(a, b));\n    return 0;\n}\n'
    cases = [{"stdin": "2 3", "expected_stdout": "5"}, {"stdin": "7 -7", "expected_stdout": "0"}]
    tests = {"kind": "io", "driver": driver, "cases": cases}
    passed = await run(judge, "int add(int a, int b) { return a + b; }\n", tests, language="c")
    assert passed.reward == 1.0, passed
    failed = await run(judge, "int add(int a, int b) { return a * b; }\n", tests, language="c")
    assert (failed.reward, failed.error_class) == (0.0, "wrong_answer"), failed
    broken = await run(judge, "int add(int a, int b) { return a + }\n", tests, language="c")
    assert (broken.reward, broken.error_class) == (0.0, "compile_error"), broken
    quitter = "#include <stdlib.h>\nint add(int a, int b) { exit(0); }\n"
    early = await run(judge, quitter, tests, language="c")
    assert (early.reward, early.error_class) == (0.0, "wrong_answer"), early


# ------------------------------------------------------------------------ reward shapes

SQUARE_IO = {
    "kind": "io",
    "cases": [
        {"stdin": "1\n", "expected_stdout": "1\n", "weight": 1},
        {"stdin": "2\n", "expected_stdout": "4\n", "weight": 2},
        {"stdin": "3\n", "expected_stdout": "9\n", "weight": 5},
    ],
}
SQUARE_FUNCTION = {
    "kind": "function",
    "entry_point": "square",
    "cases": [
        {"args": [1], "expected": 1, "weight": 1},
        {"args": [2], "expected": 4, "weight": 2},
        {"args": [3], "expected": 9, "weight": 5},
    ],
}
# Right for 1 and 2, wrong for 3.
SQUARE_MOSTLY = (
    "def square(x):\n    return x * x if x < 3 else 0\n\n\n"
    'if __name__ == "__main__":\n    print(square(int(input())))\n'
)


@pytest.mark.parametrize("tests", [SQUARE_IO, SQUARE_FUNCTION], ids=["io", "function"])
@pytest.mark.parametrize(
    ("shape", "reward"), [("binary", 0.0), ("fraction", 2 / 3), ("weighted", 3 / 8)]
)
async def test_reward_shapes(
    judge: Judge, tests: dict[str, Any], shape: str, reward: float
) -> None:
    result = await run(judge, SQUARE_MOSTLY, tests, reward=shape)
    assert result.reward == pytest.approx(reward), result
    assert (result.passed, result.total, result.error_class) == (2, 3, "wrong_answer")
    assert [t.weight for t in result.tests] == [1, 2, 5]


async def test_weighted_reward_when_everything_passes(judge: Judge) -> None:
    code = SQUARE_MOSTLY.replace("x * x if x < 3 else 0", "x * x")
    for tests in (SQUARE_IO, SQUARE_FUNCTION):
        result = await run(judge, code, tests, reward="weighted")
        assert (result.reward, result.error_class, result.passed) == (1.0, None, 3), result


async def test_error_class_is_the_first_failed_tests_verdict(judge: Judge) -> None:
    code = (
        "def square(x):\n"
        "    if x == 2:\n        return 5\n"
        "    if x == 3:\n        raise KeyError(x)\n"
        "    return x * x\n"
    )
    result = await run(judge, code, SQUARE_FUNCTION, reward="fraction")
    assert verdicts(result) == ["passed", "wrong_answer", "runtime_error"], result
    assert result.error_class == "wrong_answer"
    assert "KeyError" in (result.tests[2].message or "")


async def test_early_stop_skips_the_rest_of_the_io_cases(judge: Judge) -> None:
    code = "x = int(input())\nprint(0 if x == 1 else x * x)\n"
    result = await run(judge, code, SQUARE_IO, reward="fraction", early_stop=True)
    assert verdicts(result) == ["wrong_answer", "skipped", "skipped"], result
    assert (result.passed, result.total, result.reward) == (0, 3, 0.0)
    assert result.error_class == "wrong_answer"
    without = await run(judge, code, SQUARE_IO, reward="fraction")
    assert verdicts(without) == ["wrong_answer", "passed", "passed"], without
    assert without.reward == pytest.approx(2 / 3)


async def test_early_stop_in_the_middle_of_a_request_of_cases(judge: Judge) -> None:
    """Early stop sends the cases in requests of 1, 2, 4, ...: a failure inside one (here the
    4th case, in the third request) still skips every case after it, whether a wrong
    answer (the request's other cases ran, and are not counted) or a timeout."""
    cases = [{"stdin": f"{x}\n", "expected_stdout": f"{x * x}\n"} for x in range(1, 8)]
    tests = {"kind": "io", "cases": cases}
    wrong = "x = int(input())\nprint(0 if x == 4 else x * x)\n"
    result = await run(judge, wrong, tests, reward="fraction", early_stop=True)
    assert verdicts(result) == ["passed"] * 3 + ["wrong_answer"] + ["skipped"] * 3, result
    assert result.reward == pytest.approx(3 / 7)
    hangs = "import time\nx = int(input())\nif x >= 4: time.sleep(60)\nprint(x * x)\n"
    result = await run(judge, hangs, tests, reward="fraction", early_stop=True, test_timeout_s=1.0)
    assert verdicts(result) == ["passed"] * 3 + ["timeout"] + ["skipped"] * 3, result
    without = await run(judge, wrong, {"kind": "io", "cases": cases}, reward="fraction")
    assert verdicts(without) == ["passed"] * 3 + ["wrong_answer"] + ["passed"] * 3, without


async def test_early_stop_skips_the_rest_of_the_function_cases(judge: Judge) -> None:
    code = "def square(x):\n    return 0 if x == 1 else x * x\n"
    result = await run(judge, code, SQUARE_FUNCTION, reward="fraction", early_stop=True)
    assert verdicts(result) == ["wrong_answer", "skipped", "skipped"], result
    assert result.reward == 0.0


# ------------------------------------------------------------------------ assert tests

HUMANEVAL_CHECK = """\
METADATA = {"author": "test"}


def check(candidate):
    assert candidate([1, 2, 3]) == 6
    assert candidate([]) == 0
    values = [5, 5]
    assert candidate(values) == 10
    assert candidate([-1, 1]) == 0, "opposites cancel"
    assert candidate([100]) == 100
"""


async def test_each_assert_is_a_test(judge: Judge) -> None:
    """HumanEval's check(candidate) with 5 asserts, 3 right: fraction 0.6."""
    code = "def total(xs):\n    return sum(xs) if len(xs) != 2 else 1\n"
    tests = {"kind": "assert", "entry_point": "total", "script": HUMANEVAL_CHECK}
    result = await run(judge, code, tests, reward="fraction")
    assert result.reward == pytest.approx(0.6), result
    assert (result.passed, result.total, result.error_class) == (3, 5, "wrong_answer")
    assert verdicts(result) == ["passed", "passed", "wrong_answer", "wrong_answer", "passed"]
    assert "candidate(values) == 10" in result.tests[2].name
    assert "opposites cancel" in (result.tests[3].message or "")
    binary = await run(judge, code, tests)
    assert binary.reward == 0.0
    honest = await run(judge, "def total(xs):\n    return sum(xs)\n", tests)
    assert (honest.reward, honest.passed, honest.total) == (1.0, 5, 5), honest


async def test_module_level_asserts_mbpp_style(judge: Judge) -> None:
    script = (
        "assert is_even(2)\n"
        "assert not is_even(3)\n"
        "assert is_even(0) is True\n"
        "assert [is_even(n) for n in range(4)] == [True, False, True, False]\n"
    )
    tests = {"kind": "assert", "entry_point": "is_even", "script": script}
    result = await run(judge, "def is_even(n):\n    return n % 2 == 0\n", tests)
    assert (result.reward, result.passed, result.total) == (1.0, 4, 4), result
    truthy = await run(judge, "def is_even(n):\n    return 1 - n % 2\n", tests, reward="fraction")
    # The asserts keep Python's meaning in the judge: `is True` fails, but 1 == True.
    assert verdicts(truthy) == ["passed", "passed", "wrong_answer", "passed"], truthy


async def test_failing_setup_leaves_the_rest_not_reached(judge: Judge) -> None:
    script = (
        "def check(candidate):\n"
        "    assert candidate(1) == 2\n"
        "    table = {k: candidate(k) for k in range(3)}\n"
        "    assert table[2] == 3\n"
    )
    tests = {"kind": "assert", "entry_point": "inc", "script": script}
    code = "def inc(x):\n    if x == 0:\n        raise RuntimeError('zero')\n    return x + 1\n"
    result = await run(judge, code, tests, reward="fraction")
    assert result.passed == 1 and result.reward is not None and result.reward < 1.0, result
    assert result.error_class == "runtime_error"


# ------------------------------------------------------------------------ function values

VALUE_CASES: list[tuple[str, str, Any, bool]] = [
    # (name, the candidate's return expression, expected JSON, passes)
    ("tuple", "(1, 'a', None)", {"$tuple": [1, "a", None]}, True),
    ("tuple given as list", "(1, 2)", [1, 2], True),
    ("nested tuple", "[(1, 2), (3, 4)]", [{"$tuple": [1, 2]}, {"$tuple": [3, 4]}], True),
    ("float within tolerance", "0.1 + 0.2", 0.3, True),
    ("float outside tolerance", "0.3001", 0.3, False),
    ("int for float", "3", 3.0, True),
    ("nan", "float('nan')", {"$float": "nan"}, True),
    ("infinity", "float('-inf')", {"$float": "-inf"}, True),
    ("dict", "{'a': [1, 2], 'b': {'c': None}}", {"a": [1, 2], "b": {"c": None}}, True),
    ("dict, wrong value", "{'a': 1}", {"a": 2}, False),
    ("dict with int keys", "{1: 'x', 2: 'y'}", {"$dict": [[1, "x"], [2, "y"]]}, True),
    ("set", "{3, 1, 2}", {"$set": [1, 2, 3]}, True),
    ("set is not a list", "[1, 2, 3]", {"$set": [1, 2, 3]}, False),
    ("frozenset", "frozenset({1})", {"$frozenset": [1]}, True),
    ("bytes", "b'\\x00\\xffab'", {"$bytes": base64.b64encode(b"\x00\xffab").decode()}, True),
    ("bytes is not str", "'ab'", {"$bytes": base64.b64encode(b"ab").decode()}, False),
    ("None", "None", None, True),
    ("None is not 0", "0", None, False),
    ("big int", "10**30 + 7", 10**30 + 7, True),
    ("big int, tagged", "-(2**100)", {"$int": str(-(2**100))}, True),
    ("big int off by one", "10**30 + 8", 10**30 + 7, False),
    ("bool is not int", "True", 1, False),
    ("int is not bool", "1", True, False),
    ("complex", "1 + 2j", {"$complex": [1.0, 2.0]}, True),
    ("str", "'héllo'", "héllo", True),
    ("exact numpy float", "__import__('numpy').float64(2.5)", 2.5, True),
]


async def test_function_values(judge: Judge) -> None:
    """Every value shape in one submission: one case per shape, each judged on its own."""
    code = "def value(i):\n    return [\n"
    code += "".join(f"        {expression},\n" for _, expression, _, _ in VALUE_CASES)
    code += "    ][i]\n"
    tests = {
        "kind": "function",
        "entry_point": "value",
        "cases": [
            {"args": [i], "expected": expected, "name": name}
            for i, (name, _, expected, _) in enumerate(VALUE_CASES)
        ],
    }
    result = await run(judge, code, tests, reward="fraction")
    got = {
        name: test.verdict.value for (name, *_), test in zip(VALUE_CASES, result.tests, strict=True)
    }
    want = {name: "passed" if ok else "wrong_answer" for name, _, _, ok in VALUE_CASES}
    assert got == want, result


async def test_function_arguments_cross_as_values(judge: Judge) -> None:
    code = (
        "def describe(*args, **kwargs):\n"
        "    return [type(a).__name__ for a in args] + sorted(kwargs), args, kwargs\n"
    )
    args = [{"$tuple": [1, 2]}, {"$set": [1]}, {"$bytes": "AA=="}, 10**40, None, 1.5, {"k": [1]}]
    # Inside a wire tag, values are in wire form: a dict is {"$dict": [[key, value], ...]}.
    wire_args = [*args[:-1], {"$dict": [["k", [1]]]}]
    expected = {
        "$tuple": [
            ["tuple", "set", "bytes", "int", "NoneType", "float", "dict", "flag", "text"],
            {"$tuple": wire_args},
            {"$dict": [["flag", True], ["text", "x"]]},
        ]
    }
    tests = {
        "kind": "function",
        "entry_point": "describe",
        "cases": [{"args": args, "kwargs": {"flag": True, "text": "x"}, "expected": expected}],
    }
    result = await run(judge, code, tests)
    assert result.reward == 1.0, result


async def test_float_tolerances_are_configurable(judge: Judge) -> None:
    tests = {
        "kind": "function",
        "entry_point": "f",
        "float_rel_tol": 0.0,
        "float_abs_tol": 0.01,
        "cases": [{"args": [], "expected": 1.0}],
    }
    close = await run(judge, "def f():\n    return 1.005\n", tests)
    assert close.reward == 1.0, close
    far = await run(judge, "def f():\n    return 1.02\n", tests)
    assert (far.reward, far.error_class) == (0.0, "wrong_answer"), far


async def test_plain_dict_inside_a_wire_tag(judge: Judge) -> None:
    tests = {
        "kind": "function",
        "entry_point": "f",
        "cases": [{"args": [{"$tuple": [{"k": 1}]}], "expected": 1}],
    }
    try:
        result = await run(judge, "def f(pair):\n    return pair[0]['k']\n", tests)
    except InvalidRequestError:
        return  # refused before running: fine
    assert result.reward == 1.0, result


async def test_a_returned_object_is_not_a_value(judge: Judge) -> None:
    code = "class Box:\n    pass\n\n\ndef f():\n    return Box()\n"
    tests = {"kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": {}}]}
    result = await run(judge, code, tests)
    assert (result.reward, result.error_class) == (0.0, "wrong_answer"), result


async def test_missing_entry_point(judge: Judge) -> None:
    tests = {"kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": 1}]}
    result = await run(judge, "def g():\n    return 1\n", tests)
    assert result.reward == 0.0 and result.error_class in ("runtime_error", "wrong_answer"), result


# ------------------------------------------------------------------------ pytest files

STACK = """\
MAX_SIZE = 3
GREETING = "hi"


class StackFull(Exception):
    pass


class StackEmpty(LookupError):
    pass


class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        if len(self.items) >= MAX_SIZE:
            raise StackFull(f"at most {MAX_SIZE}")
        self.items.append(item)

    def pop(self):
        if not self.items:
            raise StackEmpty("empty")
        return self.items.pop()

    def peek(self):
        return self.items[-1]

    def __len__(self):
        return len(self.items)


def parse_int(text):
    if not text.strip().lstrip("-").isdigit():
        raise ValueError(f"not an int: {text!r}")
    return int(text)
"""

STACK_TESTS = {
    "conftest.py": """\
import pytest

import solution


@pytest.fixture
def full_stack():
    stack = solution.Stack()
    for item in range(solution.MAX_SIZE):
        stack.push(item)
    return stack
""",
    "test_stack.py": """\
import pytest

import solution


@pytest.fixture
def stack():
    return solution.Stack()


def test_constants():
    assert solution.MAX_SIZE == 3
    assert solution.GREETING == "hi"


def test_push_pop(stack):
    stack.push(1)
    stack.push("two")
    assert len(stack) == 2
    assert stack.peek() == "two"
    assert stack.pop() == "two"
    assert stack.pop() == 1


def test_pop_empty_raises(stack):
    with pytest.raises(solution.StackEmpty):
        stack.pop()


def test_empty_is_a_lookup_error(stack):
    with pytest.raises(LookupError, match="empty"):
        stack.pop()


def test_full(full_stack):
    with pytest.raises(solution.StackFull):
        full_stack.push(99)


class TestTwoStacks:
    def test_independent(self):
        first, second = solution.Stack(), solution.Stack()
        first.push(1)
        assert len(second) == 0
""",
    "test_parse.py": """\
import pytest

from solution import parse_int


@pytest.mark.parametrize(("text", "value"), [("1", 1), ("-20", -20), (" 7 ", 7)])
def test_parse(text, value):
    assert parse_int(text) == value


def test_rejects():
    with pytest.raises(ValueError):
        parse_int("x1")
""",
}

STACK_TEST_COUNT = 6 + 4


async def test_pytest_files_pass(judge: Judge) -> None:
    result = await run(judge, STACK, {"kind": "files", "files": STACK_TESTS})
    assert (result.reward, result.error_class) == (1.0, None), result
    assert (result.passed, result.total) == (STACK_TEST_COUNT, STACK_TEST_COUNT)
    names = {test.name for test in result.tests}
    assert "test_stack.py::TestTwoStacks::test_independent" in names
    assert "test_parse.py::test_parse[-20--20]" in names


@pytest.mark.parametrize(
    ("mutation", "failing"),
    [
        (("MAX_SIZE = 3", "MAX_SIZE = 4"), {"test_stack.py::test_constants"}),
        (
            ('raise StackEmpty("empty")', 'raise IndexError("empty")'),
            {"test_stack.py::test_pop_empty_raises"},  # IndexError is still a LookupError
        ),
        (("return self.items.pop()", "return self.items[0]"), {"test_stack.py::test_push_pop"}),
        (
            ('raise StackFull(f"at most {MAX_SIZE}")', "pass"),
            {"test_stack.py::test_full"},
        ),
    ],
    ids=["constant", "exception class", "pop", "no raise"],
)
async def test_pytest_files_catch_each_mistake(
    judge: Judge, mutation: tuple[str, str], failing: set[str]
) -> None:
    code = STACK.replace(*mutation)
    assert code != STACK
    result = await run(judge, code, {"kind": "files", "files": STACK_TESTS}, reward="fraction")
    failed = {test.name for test in result.tests if test.verdict.value != "passed"}
    assert failed == failing, result
    assert result.total == STACK_TEST_COUNT
    assert result.reward == pytest.approx((STACK_TEST_COUNT - len(failing)) / STACK_TEST_COUNT)


async def test_pytest_collection_error_is_not_a_pass(judge: Judge) -> None:
    files = {
        "test_bad.py": (
            "import solution\nfrom solution import missing_name\n\n\ndef test_x():\n    pass\n"
        )
    }
    result = await run(judge, "def present():\n    return 1\n", {"kind": "files", "files": files})
    assert result.reward == 0.0 and result.error_class == "runtime_error", result


async def test_custom_module_name(judge: Judge) -> None:
    files = {"test_m.py": "import mylib\n\n\ndef test_m():\n    assert mylib.VALUE == 7\n"}
    tests = {"kind": "files", "files": files, "module": "mylib"}
    result = await run(judge, "VALUE = 7\n", tests)
    assert result.reward == 1.0, result


# ------------------------------------------------------------------------ io comparisons

COMPARE_CASES = [
    # (mode, printed, expected, passes)
    ("exact", "5\n", "5\n", True),
    ("exact", "5", "5\n", False),
    ("exact", "5 \n", "5\n", False),
    ("rstrip", "5  \n\n\n", "5", True),
    ("rstrip", "a b\n", "a  b\n", False),
    ("rstrip", " 5\n", "5\n", False),
    ("tokens", "1   2\n3\n", "1 2 3", True),
    ("tokens", "1 2", "1 2 3", False),
    ("float", "0.33333334 2\n", "0.333333333 2.0", True),
    ("float", "0.34 2", "0.333333333 2.0", False),
    ("float", "1e-3 abc", "0.001 abc", True),
    ("float", "1.0 abd", "1.0 abc", False),
]


@pytest.mark.parametrize(("mode", "printed", "expected", "passes"), COMPARE_CASES)
async def test_io_compare_modes(
    judge: Judge, mode: str, printed: str, expected: str, passes: bool
) -> None:
    code = f"import sys\nsys.stdout.write({printed!r})\n"
    tests = {"kind": "io", "compare": mode, "cases": [{"expected_stdout": expected}]}
    result = await run(judge, code, tests)
    assert verdicts(result) == ["passed" if passes else "wrong_answer"], result


async def test_float_compare_tolerance_is_configurable(judge: Judge) -> None:
    tests = {
        "kind": "io",
        "compare": "float",
        "float_rel_tol": 0.0,
        "float_abs_tol": 0.1,
        "cases": [{"expected_stdout": "1.0"}],
    }
    close = await run(judge, "print(1.05)\n", tests)
    assert close.reward == 1.0, close
    far = await run(judge, "print(1.2)\n", tests)
    assert far.reward == 0.0, far


# ------------------------------------------------------------------------ infrastructure


async def test_killed_container_is_infra_never_zero(
    pool: Pool, docker_client: docker.DockerClient
) -> None:
    name = "judge-infra-kill"
    policy = make_policy(
        name,
        resources={"wall_time_s": 10.0, "cpu_time_s": 10.0, "memory_mb": 128},
        env={"set": {"TEST_POOL_GROUP": name}},
        pool={"warm": 0, "max": 1},
    )
    judge = Judge(ExecutionService(pool, {"default": policy}, resolve_image))
    code = "import time\n\n\ndef f():\n    time.sleep(30)\n"
    tests = {"kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": 1}]}
    task = asyncio.create_task(run(judge, code, tests, test_timeout_s=9))
    deadline = time.monotonic() + 30
    killed = False
    while not killed and time.monotonic() < deadline and not task.done():
        await asyncio.sleep(0.2)
        containers = await asyncio.to_thread(
            docker_client.containers.list, filters={"label": f"{LABEL_POLICY}={name}"}
        )
        for container in containers:
            # Kill only once the candidate (the sandbox uid) is running, mid-judgement.
            top = await asyncio.to_thread(container.top)
            uid = top["Titles"].index("UID")
            if any(process[uid] == "10001" for process in top["Processes"]):
                await asyncio.to_thread(container.kill)
                killed = True
    assert killed, "no container of the policy appeared"
    result = await asyncio.wait_for(task, 60)
    assert result.reward is None, result
    assert result.error_class == "infra", result
    assert (result.passed, result.total, result.tests) == (0, 0, []), result
    assert "runner" in (result.message or ""), result


# ------------------------------------------------------------------------ the service

SQUARE_OK = "def square(x):\n    return x * x\n"


def batch_items() -> list[dict[str, Any]]:
    return [
        {"id": "ok", "code": SQUARE_OK, "tests": SQUARE_FUNCTION},
        {"id": "wrong", "code": "def square(x):\n    return x + x\n", "tests": SQUARE_FUNCTION},
        {"id": "io", "code": "x = int(input())\nprint(x * x)\n", "tests": SQUARE_IO},
    ]


def ndjson(response: httpx.Response) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    assert lines and lines[-1].get("done") is True, lines
    return sorted(lines[:-1], key=lambda line: line["index"]), lines[-1]


def test_evaluate_streams_items_then_a_summary(http: httpx.Client) -> None:
    response = http.post("/v1/evaluate", json={"items": batch_items(), "concurrency": 2})
    items, summary = ndjson(response)
    assert [(i["index"], i["id"]) for i in items] == [(0, "ok"), (1, "wrong"), (2, "io")]
    rewards = [i["result"]["reward"] for i in items]
    assert rewards == [1.0, 0.0, 1.0]
    assert items[1]["result"]["error_class"] == "wrong_answer"
    assert summary["items"] == summary["judged"] == 3
    assert summary["all_passed"] == 2
    assert (summary["infra_errors"], summary["errors"]) == (0, 0)
    assert summary["mean_reward"] == pytest.approx(2 / 3)
    assert summary["replayed"] is False


def test_evaluate_idempotency_key_replays(http: httpx.Client) -> None:
    key = f"judge-tests-{time.time_ns()}"
    body = {"items": batch_items()}
    first_items, first_summary = ndjson(
        http.post("/v1/evaluate", json=body, headers={"Idempotency-Key": key})
    )
    again_items, again_summary = ndjson(
        http.post("/v1/evaluate", json=body, headers={"Idempotency-Key": key})
    )
    assert first_summary["replayed"] is False
    assert again_summary["replayed"] is True
    # Ran once: the second answer is the first run's, timings included.
    assert again_items == first_items
    assert [i["result"]["duration_s"] for i in again_items] == [
        i["result"]["duration_s"] for i in first_items
    ]
    other_items, other_summary = ndjson(http.post("/v1/evaluate", json=body))
    assert other_summary["replayed"] is False
    assert [i["result"]["duration_s"] for i in other_items] != [
        i["result"]["duration_s"] for i in first_items
    ]


def test_evaluate_item_timeout_is_deadline_exceeded(http: httpx.Client) -> None:
    slow = {
        "id": "slow",
        "code": "import time\ntime.sleep(5)\n",
        "tests": {"kind": "io", "cases": [{"expected_stdout": ""}]},
    }
    body = {"items": [slow], "item_timeout_s": 0.3}
    items, summary = ndjson(http.post("/v1/evaluate", json=body))
    result = items[0]["result"]
    assert (result["reward"], result["error_class"]) == (None, "deadline_exceeded"), result
    assert summary["mean_reward"] is None


def test_evaluate_batch_deadline_is_deadline_exceeded(http: httpx.Client) -> None:
    slow = {
        "code": "import time\ntime.sleep(5)\n",
        "tests": {"kind": "io", "cases": [{"expected_stdout": ""}]},
    }
    body = {"items": [slow, slow, slow], "deadline_s": 0.5, "concurrency": 1}
    items, summary = ndjson(http.post("/v1/evaluate", json=body))
    assert [i["result"]["error_class"] for i in items] == ["deadline_exceeded"] * 3, items
    assert all(i["result"]["reward"] is None for i in items)
    assert summary["judged"] == 3 and summary["mean_reward"] is None


def test_evaluate_batch_early_stop(http: httpx.Client) -> None:
    item = {"code": "x = int(input())\nprint(0)\n", "tests": SQUARE_IO, "reward": "fraction"}
    items, _ = ndjson(http.post("/v1/evaluate", json={"items": [item], "early_stop": True}))
    tests = items[0]["result"]["tests"]
    assert [t["verdict"] for t in tests] == ["wrong_answer", "skipped", "skipped"]
    items, _ = ndjson(http.post("/v1/evaluate", json={"items": [item], "early_stop": False}))
    assert [t["verdict"] for t in items[0]["result"]["tests"]] == ["wrong_answer"] * 3


def test_evaluate_refuses_a_bad_item_before_running(http: httpx.Client) -> None:
    key = f"judge-tests-bad-{time.time_ns()}"
    items = batch_items()
    items.insert(1, {"code": "x", "language": "cobol", "tests": SQUARE_IO})
    response = http.post("/v1/evaluate", json={"items": items}, headers={"Idempotency-Key": key})
    assert response.status_code == 422, response.text
    error = response.json()
    assert "items[1]" in error["message"] and "cobol" in error["message"], error
    # Nothing ran or was remembered: the same key with good items runs afresh.
    _, summary = ndjson(
        http.post("/v1/evaluate", json={"items": batch_items()}, headers={"Idempotency-Key": key})
    )
    assert summary["replayed"] is False


def test_judge_over_http(http: httpx.Client) -> None:
    body = {"id": "sq", "code": SQUARE_MOSTLY, "tests": SQUARE_IO, "reward": "weighted"}
    response = http.post("/v1/judge", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["id"] == "sq"
    assert result["reward"] == pytest.approx(3 / 8)
    assert [t["verdict"] for t in result["tests"]] == ["passed", "passed", "wrong_answer"]


def test_get_reward_openrlhf(http: httpx.Client) -> None:
    prompt = "Write square(x).\n"
    right = prompt + "Sure:\n```python\ndef square(x):\n    return x * x\n```\nDone."
    wrong = prompt + "```python\ndef square(x):\n    return x\n```"
    unfenced = prompt + "def square(x):\n    return x ** 2\n"
    label = json.dumps({"tests": SQUARE_FUNCTION})
    body = {
        "query": [right, wrong, unfenced],
        "prompts": [prompt] * 3,
        "labels": [label, label, {"tests": SQUARE_FUNCTION, "reward": "fraction"}],
    }
    response = http.post("/get_reward", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["rewards"] == [1.0, 0.0, 1.0], data
    assert data["scores"] == data["rewards"]
    assert data["extra_logs"]["all_passed"] == [1.0, 0.0, 1.0]
    assert data["extra_logs"]["infra_error"] == [0.0, 0.0, 0.0]


def test_get_reward_one_bad_response_does_not_sink_the_batch(http: httpx.Client) -> None:
    label = {
        "tests": {"kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": 0.5}]}
    }
    good = "```python\ndef f():\n    return 0.5\n```"
    huge = "```python\ndef f():\n    return 10**400\n```"
    response = http.post("/get_reward", json={"query": [good, huge], "labels": [label, label]})
    assert response.status_code == 200, response.text
    assert response.json()["rewards"] == [1.0, 0.0]


def test_get_reward_needs_a_label_per_query(http: httpx.Client) -> None:
    response = http.post("/get_reward", json={"query": ["a", "b"], "labels": ["{}"]})
    assert response.status_code == 422, response.text


def test_run_code_sandboxfusion(http: httpx.Client) -> None:
    data = base64.b64encode(b"21\n").decode()
    code = (
        "import sys\n"
        "n = int(open('input.txt').read())\n"
        "open('out/result.bin', 'wb').write(bytes([n, 0, 255]))\n"
        "print(n * 2)\n"
        "sys.exit(3)\n"
    )
    body = {
        "code": "import os\nos.makedirs('out', exist_ok=True)\n" + code,
        "language": "python",
        "files": {"input.txt": data},
        "fetch_files": ["out/result.bin"],
    }
    response = http.post("/run_code", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "Failed"  # a non-zero exit
    run_result = result["run_result"]
    assert (run_result["status"], run_result["return_code"]) == ("Finished", 3)
    assert run_result["stdout"] == "42\n"
    assert base64.b64decode(result["files"]["out/result.bin"]) == bytes([21, 0, 255])


def test_run_code_time_limit(http: httpx.Client) -> None:
    body = {"code": "while True:\n    pass\n", "run_timeout": 0.5}
    response = http.post("/run_code", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "Failed"
    assert result["run_result"]["status"] == "TimeLimitExceeded", result


def test_run_code_success(http: httpx.Client) -> None:
    response = http.post("/run_code", json={"code": "print(input()[::-1])", "stdin": "abc\n"})
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "Success"
    assert (result["run_result"]["return_code"], result["run_result"]["stdout"]) == (0, "cba\n")
