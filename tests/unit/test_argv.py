"""Client paths on command lines: never an option, whoever builds the command.

:func:`sandbox.core.argv.path_arg` is checked on the words that once were options,
and a scan of the library checks that every command naming a path-taking program
(``find``, ``rm``, ``chmod`` ...) puts nothing but constants and ``path_arg``/
``shell_command`` results on its command line.
"""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import pytest

import sandbox
from sandbox.core.argv import path_arg, shell_command
from sandbox.errors import InvalidRequestError
from sandbox.evals.tasks import SHIPPED_TASK_DIRS

PACKAGE = Path(sandbox.__file__).resolve().parent
# The layers that build commands from what clients, tasks and agents send.
CLIENT_LAYERS = ("core", "judge", "service", "integrations", "evals", "rl", "quality")
PATH_PROGRAMS = {"find", "tar", "rm", "chmod", "chown", "ls", "cat", "cp", "mv", "ln", "touch"}
SAFE_CALLS = {"path_arg", "shell_command"}


@pytest.mark.parametrize(
    ("given", "word"),
    [
        ("-delete", "./-delete"),
        ("--help", "./--help"),
        ("-d/x", "./-d/x"),
        ("src/app.py", "./src/app.py"),
        (".", "./."),
        ("/workspace/../tmp/-x", "/tmp/-x"),
        ("/workspace", "/workspace"),
    ],
)
def test_a_path_becomes_a_word_that_is_no_option(given: str, word: str) -> None:
    assert path_arg(given) == word
    assert not word.startswith("-")


@pytest.mark.parametrize("given", ["", "a\x00b"])
def test_an_empty_path_or_a_nul_is_refused(given: str) -> None:
    with pytest.raises(InvalidRequestError, match="non-empty and without NUL"):
        path_arg(given)


def test_a_shell_command_quotes_each_path_after_a_double_dash() -> None:
    line = shell_command("chmod", "+x", paths=["-R", "a b", "it's", "/x/../y"])
    assert shlex.split(line) == ["chmod", "+x", "--", "./-R", "./a b", "./it's", "/y"]


def _sources() -> list[Path]:
    return [
        path
        for layer in CLIENT_LAYERS
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        if not SHIPPED_TASK_DIRS & set(path.parts)
    ]


def _constant(node: ast.expr) -> bool:
    """A literal, or a module-level constant's name (UPPER_CASE), perhaps an attribute's."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else node.attr
        return name.isupper()
    if isinstance(node, ast.JoinedStr):
        return all(
            _constant(v.value) if isinstance(v, ast.FormattedValue) else True for v in node.values
        )
    return False


def _safe(node: ast.expr) -> bool:
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        return name in SAFE_CALLS
    if isinstance(node, ast.Starred):
        return False
    return _constant(node)


def _program(node: ast.expr) -> str | None:
    """The program a command built by ``node`` starts with, if it is a path-taking one."""
    if isinstance(node, ast.List | ast.Tuple) and node.elts:
        first = node.elts[0]
        if isinstance(first, ast.Constant) and first.value in PATH_PROGRAMS:
            return str(first.value)
    head = node
    while isinstance(head, ast.BinOp) and isinstance(head.op, ast.Add):
        head = head.left
    if isinstance(head, ast.JoinedStr) and head.values:
        head = head.values[0]  # type: ignore[assignment]
    if isinstance(head, ast.Constant) and isinstance(head.value, str):
        word = head.value.split(" ", 1)[0]
        if word in PATH_PROGRAMS and " " in head.value:
            return word
    return None


def _unsafe_parts(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.List | ast.Tuple):
        return [e for e in node.elts if not _safe(e)]
    parts: list[ast.expr] = []
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts.append(node.right)
        node = node.left
    parts.append(node)
    return [p for p in parts if not _safe(p)]


def test_every_path_taking_command_in_the_library_is_built_safely() -> None:
    """Commands are built from constants and path_arg/shell_command only: a client's
    path can then never reach ``find``, ``rm``, ``chmod`` ... as an option."""
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.expr) or _program(node) is None:
                continue
            for part in _unsafe_parts(node):
                where = f"{path.relative_to(PACKAGE.parent)}:{part.lineno}"
                found.append(f"{where}: {ast.unparse(part)}")
    assert not found, "wrap client paths in path_arg / shell_command:\n" + "\n".join(found)


def test_the_scan_sees_an_unsafe_command() -> None:
    """The scan would catch the command that emptied a workspace."""
    node = ast.parse('["find", path, "-mindepth", "1"]', mode="eval").body
    assert _program(node) == "find"
    assert [ast.unparse(p) for p in _unsafe_parts(node)] == ["path"]
    concatenated = ast.parse('"chmod +x -- " + " ".join(paths)', mode="eval").body
    assert _program(concatenated) == "chmod"
    assert _unsafe_parts(concatenated)
