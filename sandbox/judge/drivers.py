"""``io`` tests with a ``driver``: where the evidence of a pass comes from.

A driver is code appended to the candidate's (a ``main`` that calls its function).
It runs in the candidate's process, and everything in that process (the program's
source, its binary, its memory) is readable by the candidate's code: no mark
written there, however random, can prove that the driver ran to its end. (The
judge once required a random *completion token* at the end of the output, printed
by code after the driver; a candidate that read the token from its own source,
printed it and exited 0 got reward 1. It is gone.) What a driver can prove is what
it prints: values compared here, by the trusted side, with expected outputs that
never enter the container. So:

- A driver with printed evidence (some case's ``expected_stdout`` is not blank):
  the program is the candidate's code and then the driver, and its output is
  compared with the expected one. Only a candidate that computes the values passes.
- A *silent* driver (every ``expected_stdout`` blank: asserts such as MultiPL-E's
  tests, whose only evidence would be the exit status of the candidate's own
  process): in Python it runs in the judge's process against the candidate's
  module, which lives in its own process, every call crossing the boundary as for
  ``assert`` tests (:func:`judge_side_tests`); in every other language it is
  refused (:func:`check_driver`).

The old placeholder :data:`~sandbox.languages.DRIVER_DONE` proves nothing now; a
driver that still prints it as its last line has that line dropped from the output
before the comparison (:func:`without_placeholder`), so drivers written for the old
rule keep working.
"""

from __future__ import annotations

import builtins
import json
import symtable

from sandbox.errors import InvalidRequestError
from sandbox.judge.models import FileTests, IOTests, TestResult, TestVerdict
from sandbox.languages import DRIVER_DONE, Language

JUDGE_SIDE_FILE = "test_driver.py"
JUDGE_SIDE_SPEC = "driver.json"
JUDGE_SIDE_MODULE = "solution"
# Run by the judge's pytest harness (runner/harness/judge_pytest.py), where ``import
# solution`` is the candidate's module across the boundary. One test a case: the
# driver's code, in a fresh namespace holding the candidate's names it uses, with the
# case's stdin as ``sys.stdin``.
JUDGE_SIDE_TEST = '''\
"""An io test's silent driver, run by the judge against the candidate's module."""

import builtins
import io
import json
import pathlib
import sys
import traceback

import pytest

import solution

SPEC = json.loads((pathlib.Path(__file__).parent / "driver.json").read_text())
CODE = compile(SPEC["driver"], "driver", "exec", dont_inherit=True)
LINES = SPEC["driver"].splitlines()


@pytest.mark.parametrize("case", range(len(SPEC["stdin"])))
def test_case(case):
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    for name in SPEC["names"]:
        try:
            namespace[name] = getattr(solution, name)
        except AttributeError:
            pass
    stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(SPEC["stdin"][case].encode()), encoding="utf-8")
    try:
        exec(CODE, namespace)
    except AssertionError as exc:  # say which line of the driver failed
        frames = traceback.extract_tb(exc.__traceback__)
        lines = [f.lineno for f in frames if f.filename == "driver" and f.lineno]
        if lines and lines[-1] <= len(LINES):
            where = f"driver line {lines[-1]}: {LINES[lines[-1] - 1].strip()[:200]}"
            exc.args = (f"{where} ({exc})" if exc.args else where,)
        raise
    finally:
        sys.stdin = stdin
'''


def driven_program(code: str, driver: str | None) -> str:
    """The program an ``io`` test runs in the candidate's process: its code, then the driver."""
    return code if driver is None else f"{code}\n{driver}\n"


def runs_in_judge(tests: IOTests, language: Language) -> bool:
    """A silent Python driver: it runs in the judge's process (:func:`judge_side_tests`)."""
    return tests.silent_driver and language.name == "python"


def check_driver(tests: IOTests, language: Language) -> None:
    """Refuse a driver whose only evidence would come from the candidate's own process: a
    silent one outside Python (in Python it runs in the judge; it must be valid Python)."""
    if not tests.silent_driver:
        return
    if language.name == "python":
        _free_names(tests.driver or "")
        return
    raise InvalidRequestError(
        f"io tests whose {language.name} driver prints nothing (every expected_stdout blank) "
        "would take the exit status of the candidate's own process as proof that its "
        "asserts passed, and code in that process can fake any mark of completion (it can "
        "read its own source, binary and memory): print the values the tests check, one "
        "per line, and put them in expected_stdout, which the judge compares outside the "
        'sandbox; or, in Python, use kind "assert" (a silent Python driver runs in the '
        "judge's process too)"
    )


def judge_side_tests(tests: IOTests) -> FileTests:
    """A silent Python driver as ``files`` tests: one pytest test a case, in the judge's
    process, calling the candidate's module across the boundary; :func:`case_results` maps
    their results back to the cases."""
    driver = tests.driver or ""
    spec = {
        "driver": driver,
        "names": _free_names(driver),
        "stdin": [case.stdin for case in tests.cases],
    }
    return FileTests(
        files={JUDGE_SIDE_FILE: JUDGE_SIDE_TEST, JUDGE_SIDE_SPEC: json.dumps(spec)},
        module=JUDGE_SIDE_MODULE,
    )


def case_names(tests: IOTests) -> list[str]:
    return [case.name or f"case {i}" for i, case in enumerate(tests.cases)]


def case_results(results: list[TestResult], tests: IOTests) -> list[TestResult]:
    """The judge-side run's results as the cases' (their names and weights). A case with no
    result of its own (the candidate failed to load, the judge was stopped) takes the first
    failure's; any other failure (an end of the candidate no test saw) is kept."""
    by_name = {result.name: result for result in results}
    failures = [r for r in results if r.verdict is not TestVerdict.PASSED]
    used: set[str] = set()
    out: list[TestResult] = []
    for index, (name, case) in enumerate(zip(case_names(tests), tests.cases, strict=True)):
        result = by_name.get(f"{JUDGE_SIDE_FILE}::test_case[{index}]")
        if result is not None:
            used.add(result.name)
        elif failures:
            result = failures[0]
            used.add(result.name)
        else:
            result = TestResult(name=name, verdict=TestVerdict.RUNTIME_ERROR, message="not run")
        out.append(result.model_copy(update={"name": name, "weight": case.weight}))
    return out + [r for r in failures if r.name not in used]


def without_placeholder(output: str) -> str:
    """The output without a last line printing the old placeholder (it proves nothing)."""
    for end in (f"{DRIVER_DONE}\n", DRIVER_DONE):
        if output.endswith(end):
            return output[: -len(end)]
    return output


def _free_names(driver: str) -> list[str]:
    """The names the driver uses and never binds: the candidate's. Builtins are left out (a
    candidate cannot replace the driver's ``len`` or ``sorted``), as are dunder names."""
    try:
        table = symtable.symtable(driver, "driver", "exec")
    except SyntaxError as exc:
        raise InvalidRequestError(
            f"the driver is not valid Python (line {exc.lineno}): {exc.msg}"
        ) from None
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    used: set[str] = set()
    tables = [table]
    while tables:
        scope = tables.pop()
        tables.extend(scope.get_children())
        for symbol in scope.get_symbols():
            if symbol.is_declared_global() and symbol.is_assigned():
                bound.add(symbol.get_name())
            if symbol.is_referenced() and symbol.is_global():
                used.add(symbol.get_name())
    return sorted(
        name
        for name in used - bound
        if not hasattr(builtins, name) and not (name.startswith("__") and name.endswith("__"))
    )
