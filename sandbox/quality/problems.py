"""Judge problem sets: JSONL files, one problem a line, in any of four shapes.

1. **Judge problems** (this repository's ``tests/data/languages/*.jsonl``): the
   hidden tests are a ``tests`` object exactly as in a judge request (``io``,
   ``function``, ``assert``, ``files``); the reference solution is the whole
   program, in ``solution`` (or ``reference``, ``canonical_solution``, ``code``).
   Optional: ``id`` (or ``task_id``, ``name``), ``language``, ``policy``,
   ``limits``, ``test_timeout_s``, ``description`` (or ``prompt``, ``text``,
   ``instruction``: the text compared for duplicates), ``category``,
   ``difficulty``, ``starter`` (the untouched initial state, if the problem
   hands one out), and ``wrong``: known-wrong solutions, each of which must
   fail (``wrong_expected`` beside it is not checked here). A line shaped like a
   judge request (``code`` and ``tests``) is a judge problem too.
2. **HumanEval** (``task_id``, ``prompt``, ``canonical_solution``, ``test``,
   ``entry_point``): ``assert`` tests running ``check(candidate)`` with the
   prompt as trusted prelude; the reference is prompt + canonical solution;
   the untouched initial state is the prompt alone.
3. **MBPP** (``task_id``, ``text``, ``code``, ``test_list``, optional
   ``test_setup_code`` and ``challenge_test_list``): ``assert`` tests made of the
   set-up code and the asserts, calling the solution's functions by name.
4. **MultiPL-E** (``prompt``, ``canonical_solution``, and ``tests`` as the text of the
   tests in the problem's language, as in ``tests/data/humaneval_multipl``): ``io``
   tests, one case with empty stdin. With ``driver`` and ``expected_stdout`` beside
   them (a printing driver, as ``tests/data/humaneval_multipl`` has), those, compared
   as floats within 1e-6; else ``tests`` as a silent driver, which only Python can
   judge (in the judge's process: elsewhere its only evidence would be the exit status
   of the candidate's own process) and which is reported broken in other languages.
   The reference is prompt + canonical solution; the untouched initial state is the
   prompt alone.

The language is the line's ``language``, else the file's name when it is one
(``go.jsonl``), else Python. Blank lines are skipped; a line that is not a JSON
object, or fits no shape, is reported as a broken problem naming the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError

from sandbox.errors import InvalidRequestError
from sandbox.judge.drivers import check_driver
from sandbox.judge.judge import JudgeRequest
from sandbox.judge.models import IOTests
from sandbox.languages import get_language

__all__ = ["MAX_PROBLEM_LINE_BYTES", "Problem", "ProblemError", "read_problem_set"]

MAX_PROBLEM_LINE_BYTES: Final = 4 * 1024 * 1024
MAX_PROBLEMS: Final = 100_000
REFERENCE_FIELDS: Final = ("solution", "reference", "canonical_solution", "code")
ID_FIELDS: Final = ("id", "task_id", "name")
TEXT_FIELDS: Final = ("description", "prompt", "text", "instruction", "question")
SHAPES: Final = (
    "a judge problem ('tests' and one of 'solution', 'reference', 'canonical_solution', "
    "'code'), a HumanEval problem ('prompt', 'canonical_solution', 'test', 'entry_point'), "
    "an MBPP problem ('text', 'code', 'test_list') or a MultiPL-E one ('prompt', "
    "'canonical_solution', 'tests' as text)"
)


class ProblemError(Exception):
    """One line of a problem set cannot be read as a problem."""

    def __init__(self, message: str, *, problem_id: str | None = None) -> None:
        super().__init__(message)
        self.problem_id = problem_id


@dataclass(frozen=True)
class Problem:
    """One problem: its hidden tests (a validated judge request) and reference solution."""

    id: str
    set_name: str
    source: str
    """``file:line``"""
    language: str
    request: JudgeRequest
    """The reference solution as a judge request (its ``code``)."""
    text: str = ""
    starter: str | None = None
    wrong: tuple[str, ...] = ()
    category: str = "uncategorized"
    difficulty: str | None = None
    shape: str = "judge"
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.set_name}/{self.id}"

    @property
    def reference(self) -> str:
        return self.request.code

    def with_code(self, code: str, **update: Any) -> JudgeRequest:
        """The same hidden tests against other code."""
        return self.request.model_copy(update={"code": code, **update})


def _language_of(path: Path, line: Mapping[str, Any]) -> str:
    given = line.get("language")
    if isinstance(given, str) and given:
        return get_language(given).name
    try:
        return get_language(path.stem).name
    except InvalidRequestError:
        return "python"


def _first(line: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if line.get(name) is not None:
            return line[name]
    return None


def _as_request(data: Mapping[str, Any], problem_id: str) -> JudgeRequest:
    try:
        request = JudgeRequest.model_validate(data)
        if isinstance(request.tests, IOTests):
            check_driver(request.tests, get_language(request.language))
        return request
    except InvalidRequestError as exc:
        raise ProblemError(f"the judge refuses these tests: {exc}", problem_id=problem_id) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if not str(p).startswith("function-"))
        more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise ProblemError(
            f"the tests do not validate as a judge request: {where}: {first['msg']}{more}",
            problem_id=problem_id,
        ) from None


def _multipl_e_tests(line: Mapping[str, Any]) -> dict[str, Any]:
    """A MultiPL-E line's io tests: its printing driver if it has one, else its asserts."""
    driver, expected = line.get("driver"), line.get("expected_stdout")
    if isinstance(driver, str) and isinstance(expected, str):
        return {
            "kind": "io",
            "driver": driver,
            "compare": "float",
            "float_abs_tol": 1e-6,
            "cases": [{"stdin": "", "expected_stdout": expected}],
        }
    return {"kind": "io", "driver": line["tests"], "cases": [{"stdin": "", "expected_stdout": ""}]}


def _parse(line: Mapping[str, Any], path: Path, number: int) -> Problem:
    raw_id = _first(line, ID_FIELDS)
    problem_id = str(raw_id) if raw_id is not None else f"line-{number}"
    source = f"{path}:{number}"
    language = _language_of(path, line)
    common: dict[str, Any] = {
        "id": problem_id,
        "set_name": path.stem,
        "source": source,
        "language": language,
        "category": str(line.get("category") or "uncategorized"),
        "difficulty": str(line["difficulty"]) if line.get("difficulty") is not None else None,
    }
    judge_fields = {key: line[key] for key in ("policy", "limits", "test_timeout_s") if key in line}
    humaneval = {"prompt", "canonical_solution", "test", "entry_point"} <= line.keys()
    multipl_e = {"prompt", "canonical_solution"} <= line.keys() and isinstance(
        line.get("tests"), str
    )
    if humaneval or multipl_e:
        prompt = str(line["prompt"])
        spec: dict[str, Any] = (
            {
                "kind": "assert",
                "script": str(line["test"]),
                "entry_point": str(line["entry_point"]),
                "prelude": prompt,
            }
            if humaneval
            else _multipl_e_tests(line)
        )
        request = _as_request(
            {
                "id": problem_id,
                "language": language,
                "code": prompt + str(line["canonical_solution"]),
                "tests": spec,
                **judge_fields,
            },
            problem_id,
        )
        shape = "humaneval" if humaneval else "multipl-e"
        return Problem(request=request, text=prompt, starter=prompt, shape=shape, **common)
    if "test_list" in line and "code" in line and "tests" not in line:
        tests = line["test_list"]
        if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
            raise ProblemError(
                "test_list must be a list of strings (asserts)", problem_id=problem_id
            )
        challenge = line.get("challenge_test_list") or []
        setup = str(line.get("test_setup_code") or "")
        script = "\n".join([setup, *tests, *[str(t) for t in challenge]]).strip() + "\n"
        request = _as_request(
            {
                "id": problem_id,
                "language": language,
                "code": str(line["code"]),
                "tests": {"kind": "assert", "script": script},
                **judge_fields,
            },
            problem_id,
        )
        return Problem(request=request, text=str(line.get("text") or ""), shape="mbpp", **common)
    if "tests" in line:
        reference = _first(line, REFERENCE_FIELDS)
        if not isinstance(reference, str):
            raise ProblemError(
                "has tests but no reference solution; put the correct program in 'solution' "
                "(or 'reference', 'canonical_solution', 'code')",
                problem_id=problem_id,
            )
        request = _as_request(
            {
                "id": problem_id,
                "language": language,
                "code": reference,
                "tests": line["tests"],
                **judge_fields,
            },
            problem_id,
        )
        wrong = line.get("wrong") or []
        if not isinstance(wrong, list) or not all(isinstance(w, str) for w in wrong):
            raise ProblemError("'wrong' must be a list of programs", problem_id=problem_id)
        text = _first(line, TEXT_FIELDS)
        starter = line.get("starter")
        return Problem(
            request=request,
            text=str(text or ""),
            starter=starter if isinstance(starter, str) else None,
            wrong=tuple(wrong),
            shape="judge",
            **common,
        )
    raise ProblemError(
        f"fits no known shape (keys: {', '.join(sorted(line)) or 'none'}); expected {SHAPES}",
        problem_id=problem_id,
    )


def read_problem_set(path: Path) -> Iterator[tuple[int, Problem | ProblemError]]:
    """``(line number, problem or why not)`` for each non-blank line of a JSONL file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidRequestError(f"{path}: cannot read: {exc.strerror}") from None
    count = 0
    for number, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        count += 1
        if count > MAX_PROBLEMS:
            raise InvalidRequestError(f"{path}: more than {MAX_PROBLEMS} problems; split it")
        if len(line) > MAX_PROBLEM_LINE_BYTES:
            yield number, ProblemError(f"the line is over {MAX_PROBLEM_LINE_BYTES} bytes")
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            yield number, ProblemError(f"not valid JSON ({exc}); one JSON object a line")
            continue
        if not isinstance(data, dict):
            yield number, ProblemError(f"a JSON {type(data).__name__}, not an object")
            continue
        try:
            yield number, _parse(data, path, number)
        except ProblemError as exc:
            yield number, exc
        except InvalidRequestError as exc:  # an unknown language
            yield number, ProblemError(str(exc), problem_id=str(_first(data, ID_FIELDS) or ""))
