import math
import os
import random
import re
import subprocess
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
TOOL = WORK / "calc.py"
TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\.\d+|\d+)|([A-Za-z_]\w*)|(//|[-+*/%^(),]))")


class Bad(Exception):
    pass


def _sqrt(x):
    if x < 0:
        raise Bad
    return math.sqrt(x)


def _min(*a):
    if not a:
        raise Bad
    return min(a)


def _max(*a):
    if not a:
        raise Bad
    return max(a)


NAMES = {"pi": "_pi", "e": "_e", "sqrt": "_sqrt", "abs": "_abs", "min": "_min", "max": "_max"}
SCOPE = {
    "__builtins__": {},
    "_pi": math.pi,
    "_e": math.e,
    "_sqrt": _sqrt,
    "_abs": abs,
    "_min": _min,
    "_max": _max,
}


def reference(text):
    """The value of an expression, or Bad: the grammar mapped onto Python's own."""
    text = text.rstrip()
    position, parts = 0, []
    while position < len(text):
        match = TOKEN.match(text, position)
        if match is None:
            raise Bad
        number, name, symbol = match.groups()
        if number is not None:
            parts.append(repr(float(number)) if "." in number else str(int(number)))
        elif name is not None:
            if name not in NAMES:
                raise Bad
            parts.append(NAMES[name])
        else:
            parts.append("**" if symbol == "^" else symbol)
        position = match.end()
    source = " ".join(parts)
    if not parts or re.search(r",\s*\)", source):
        raise Bad
    try:
        value = eval(source, dict(SCOPE))  # the test's own oracle, on validated tokens
    except (SyntaxError, TypeError, ZeroDivisionError, OverflowError, Bad):
        raise Bad from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Bad
    if isinstance(value, float) and not math.isfinite(value):
        raise Bad
    return value


def render(value, precision=6):
    if isinstance(value, int):
        return str(value)
    if value.is_integer():
        return str(int(value))
    text = f"{value:.{precision}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def run(*args, stdin=""):
    return subprocess.run(
        ["python3", str(TOOL), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=WORK,
        timeout=30,
    )


def check_batch(lines, *options):
    expected_out, failures = [], 0
    for line in lines:
        try:
            expected_out.append(render(reference(line), *(int(o) for o in options[1:2])))
        except Bad:
            failures += 1
    result = run(*options, stdin="\n".join(lines) + "\n")
    assert result.stdout.splitlines() == expected_out
    assert result.stderr.count("calc: error:") == failures, result.stderr
    assert result.returncode == (1 if failures else 0)


def test_the_tool_exists_and_does_not_eval():
    source = TOOL.read_text()
    assert TOOL.is_file()
    assert not re.search(r"(?<![\w.])(eval|exec|compile)\s*\(", source)
    assert not re.search(r"=\s*(eval|exec)\b", source)


def test_examples_file():
    result = run(stdin=(WORK / "examples.txt").read_text())
    assert result.stdout == "7\n9\n512\n-4\n3.5\n3\n2\n1.414214\n7.853982\n"
    assert result.stderr.count("calc: error:") == 1
    assert result.returncode == 1


KNOWN = (
    ("2^3^2", "512"),
    ("(2^3)^2", "64"),
    ("-2^2", "-4"),
    ("(-2)^2", "4"),
    ("2^-1", "0.5"),
    ("2^-2^-1", "0.707107"),
    ("--3", "3"),
    ("-+-3", "3"),
    ("3^40", "12157665459056928801"),
    ("2^64 - 1", "18446744073709551615"),
    ("6/3", "2"),
    ("1/3", "0.333333"),
    ("2/3", "0.666667"),
    ("-7 // 2", "-4"),
    ("-7 % 3", "2"),
    ("5 % -3", "-1"),
    ("7.5 // 2", "3"),
    ("7.5 % 2", "1.5"),
    (".5 + 2.", "2.5"),
    ("  1+  2 *3 ", "7"),
    ("-0.0000001", "0"),
    ("0.0000004 - 0.0000005", "0"),
    ("10 - 4 - 3", "3"),
    ("64 / 4 / 2", "8"),
    ("2 * 3 % 4", "2"),
    ("sqrt(16) + abs(-2.5)", "6.5"),
    ("min(3, -1, 2) * max(2)", "-2"),
    ("max(min(1, 2), sqrt(2))", "1.414214"),
    ("e ^ 1", "2.718282"),
    ("pi * 2 ^ 2", "12.566371"),
    ("10.0 ^ 20", "100000000000000000000"),
)
ERRORS = (
    "1 / 0",
    "1 // 0.0",
    "5 % 0",
    "0 ^ -1",
    "sqrt(-4)",
    "(-8)^(1/3)",
    "10.0 ^ 400",
    "2 ** 3",
    "2(3)",
    "1e3",
    "1 2",
    "3 <4",
    "x + 1",
    "sin(1)",
    "sqrt(1, 2)",
    "min()",
    "(1 + 2",
    "1 + 2)",
    "",
    "1 +",
    "__import__('os')",
    "[1]",
    "1.2.3",
    "abs",
    "2 ^",
    "(1, 2)",
)


def test_known_values():
    result = run("--", *(expression for expression, _ in KNOWN))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [output for _, output in KNOWN]


def test_errors():
    for expression in ERRORS[:3]:
        result = run("--", expression)
        assert result.returncode == 1
        assert result.stdout == ""
        assert result.stderr.startswith("calc: error:")
    result = run("--", *ERRORS)
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("calc: error:")]
    assert len(errors) == len(ERRORS)
    assert result.returncode == 1


def test_errors_do_not_stop_the_other_expressions():
    result = run("--", "1+1", "1/0", "-3", "bad", "2^0.5")
    assert result.stdout == "2\n-3\n1.414214\n"
    assert result.stderr.count("calc: error:") == 2
    assert result.returncode == 1


def test_precision_option():
    assert run("-p", "2", "1/3", "2/3", "0.004").stdout == "0.33\n0.67\n0\n"
    assert run("--precision", "0", "--", "2.6", "-0.4", "4/2").stdout == "3\n0\n2\n"
    assert run("-p", "15", "1/3").stdout == "0.333333333333333\n"
    assert run("-p", "16", "1/3").returncode == 2


def test_stdin_skips_blank_lines():
    result = run(stdin="\n1+1\n   \n\n2*3\n")
    assert result.stdout == "2\n6\n"
    assert result.returncode == 0


def random_expression(rng, depth):
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(
            [str(rng.randint(0, 12)), str(rng.randint(0, 99)), "2.5", ".5", "0.1", "3.", "pi"]
        )
    kind = rng.random()
    if kind < 0.45:
        op = rng.choice(["+", "-", "*", "/", "//", "%", "+", "-", "*"])
        left = random_expression(rng, depth - 1)
        right = random_expression(rng, depth - 1)
        return f"{left} {op} {right}"
    if kind < 0.6:
        return f"({random_expression(rng, depth - 1)})"
    if kind < 0.7:
        return f"-{random_expression(rng, depth - 1)}"
    if kind < 0.85:
        base = rng.choice(["2", "3", "1.5", "(1 + 1)", "e", "10", "0"])
        exponent = rng.choice(["2", "3", "-1", "0", "0.5", "-2", "2 ^ 2", "(1 / 2)", "-0.5"])
        return f"{base} ^ {exponent}"
    name = rng.choice(["sqrt", "abs", "min", "max"])
    count = 1 if name in ("sqrt", "abs") else rng.randint(1, 3)
    args = ", ".join(random_expression(rng, depth - 1) for _ in range(count))
    return f"{name}({args})"


@pytest.mark.parametrize("seed", range(6))
def test_random_expressions_match_the_reference(seed):
    rng = random.Random(seed)
    lines = [random_expression(rng, rng.randint(1, 5)) for _ in range(60)]
    if seed % 2:
        check_batch(lines)
    else:
        check_batch(lines, "-p", str(rng.choice([0, 3, 9])))
