import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
HERE = Path(__file__).resolve().parent
STRICT = "CFLAGS=-std=c11 -Wall -Wextra -Werror -O2 -Iinclude"


def run(args, cwd, stdin=None):
    return subprocess.run(args, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    project = tmp_path_factory.mktemp("build") / "rpn"
    shutil.copytree(WORK, project, symlinks=True)
    for built in [*project.rglob("*.o"), project / "rpn"]:
        built.unlink(missing_ok=True)
    return project


@pytest.fixture(scope="module")
def rpn(project):
    result = run(["make", STRICT], project)
    assert result.returncode == 0, result.stdout + result.stderr
    return project / "rpn"


def test_the_modules_are_kept():
    for path in ["src/main.c", "src/stack.c", "src/ops.c", "include/stack.h", "include/ops.h"]:
        assert (WORK / path).is_file(), path


def test_builds_with_the_projects_own_makefile(tmp_path):
    project = tmp_path / "plain"
    shutil.copytree(WORK, project, symlinks=True)
    for built in [*project.rglob("*.o"), project / "rpn"]:
        built.unlink(missing_ok=True)
    result = run(["make"], project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "-Werror" in (project / "Makefile").read_text()


def test_stack_and_ops_api(project, rpn, tmp_path):
    binary = tmp_path / "api_check"
    result = run(
        [
            "gcc",
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{project / 'include'}",
            str(HERE / "api_check.c"),
            str(project / "src" / "stack.c"),
            str(project / "src" / "ops.c"),
            "-o",
            str(binary),
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    result = run([str(binary)], tmp_path)
    assert result.stdout == "api ok\n", result.stdout


def reference(line):
    stack = []
    for token in line.split():
        try:
            stack.append(float(token))
            continue
        except ValueError:
            pass
        if token in ("+", "-", "*", "/"):
            if len(stack) < 2:
                return "error: stack underflow"
            b, a = stack.pop(), stack.pop()
            if token == "/" and b == 0:
                return "error: division by zero"
            stack.append({"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0}[token])
        elif token in ("neg", "dup"):
            if not stack:
                return "error: stack underflow"
            if token == "neg":
                stack.append(-stack.pop())
            else:
                stack.append(stack[-1])
        elif token == "swap":
            if len(stack) < 2:
                return "error: stack underflow"
            stack[-1], stack[-2] = stack[-2], stack[-1]
        else:
            return f"error: unknown token '{token}'"
        if len(stack) > 64:
            return "error: stack overflow"
    if len(stack) != 1:
        return f"error: {len(stack)} values left"
    return format(stack[0], ".10g")


def random_line(rng):
    tokens = []
    depth = 0
    for _ in range(rng.randint(1, 14)):
        if depth < 2 or rng.random() < 0.45:
            tokens.append(rng.choice(["3", "-2.5", "10", "0", "7", "1e3", ".25", "4"]))
            depth += 1
        else:
            token = rng.choice(["+", "-", "*", "/", "/", "-", "neg", "dup", "swap"])
            tokens.append(token)
            depth += {"neg": 0, "swap": 0, "dup": 1}.get(token, -1)
    if rng.random() < 0.1:
        tokens.insert(rng.randrange(len(tokens) + 1), rng.choice(["x", "1.2.3", "sqrt"]))
    return rng.choice([" ", "  ", "\t"]).join(tokens)


def test_readme_examples(rpn):
    result = run([str(rpn)], rpn.parent, "7 2 -\n7 2 /\n3 4 -\n2 3 swap /\n")
    assert result.stdout == "5\n3.5\n-1\n1.5\n"
    assert result.returncode == 0


@pytest.mark.parametrize("seed", range(10))
def test_random_lines_match_the_reference(rpn, seed):
    rng = random.Random(seed)
    lines = [random_line(rng) for _ in range(40)]
    lines.insert(5, "")
    lines.insert(9, "   \t")
    expected = [reference(line) for line in lines if line.strip()]
    result = run([str(rpn)], rpn.parent, "\n".join(lines) + "\n")
    assert result.stdout.splitlines() == expected
    assert result.returncode == (1 if any(e.startswith("error") for e in expected) else 0)


def test_errors_then_recovery(rpn):
    lines = ["+", "1 +", "1 0 /", "1 2 3", "1 swap", "neg", "dup dup", "5 bogus", "65 dup"]
    lines.append(" ".join(["1"] * 65))
    lines.append(" ".join(["1"] * 64) + " " + " ".join(["+"] * 63))
    lines.append("2 3 *")
    result = run([str(rpn)], rpn.parent, "\n".join(lines) + "\n")
    assert result.stdout.splitlines() == [
        "error: stack underflow",
        "error: stack underflow",
        "error: division by zero",
        "error: 3 values left",
        "error: stack underflow",
        "error: stack underflow",
        "error: stack underflow",
        "error: unknown token 'bogus'",
        "error: 2 values left",
        "error: stack overflow",
        "64",
        "6",
    ]
    assert result.returncode == 1
