"""Judge an assert script (HumanEval's ``check(candidate)``, MBPP's asserts) against a candidate.

    python3 judge_assert.py SPEC_JSON

The spec names the test file, the entry point, an optional trusted prelude
(HumanEval's prompt: helpers such as ``poly`` or ``encode_cyclic`` come from
it, never from the candidate, who could otherwise redefine them) and the
timeouts. Runs as the judge uid. The prelude runs here first; then the entry
point is bound to a stand-in that calls into the candidate's process; then
the test script runs and, if it defines ``check``, ``check(ENTRY_POINT)`` is
called. Each top-level statement that contains an ``assert`` (in the module,
or in ``check``'s body) is one test, recorded on its own; statements between
them run as set-up.
"""

from __future__ import annotations

import ast
import builtins
import json
import sys
from typing import Any

from report import Judge, Recorder, StopTests

RECORDER = "__judge_recorder__"


def _has_assert(node: ast.AST) -> bool:
    return any(isinstance(child, ast.Assert) for child in ast.walk(node))


def _test_name(source: str, stmt: ast.stmt) -> str:
    text = (ast.get_source_segment(source, stmt) or "").splitlines()
    first = text[0].strip() if text else type(stmt).__name__
    return f"line {stmt.lineno}: {first[:100]}"


def _wrap(source: str, stmt: ast.stmt) -> list[ast.stmt]:
    """``stmt`` inside try/except recording its outcome under a readable name."""
    name = _test_name(source, stmt)
    template = ast.parse(
        f"{RECORDER}.begin({name!r})\n"
        "try:\n"
        "    pass\n"
        "except BaseException as __judge_exc__:\n"
        f"    {RECORDER}.end({name!r}, __judge_exc__)\n"
        "else:\n"
        f"    {RECORDER}.end({name!r}, None)\n"
    ).body
    trial = template[1]
    assert isinstance(trial, ast.Try)
    trial.body = [stmt]
    return template


def _instrument_body(source: str, body: list[ast.stmt]) -> tuple[list[ast.stmt], list[str]]:
    out: list[ast.stmt] = []
    names: list[str] = []
    for stmt in body:
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
            _has_assert(stmt)
        ):
            out.extend(_wrap(source, stmt))
            names.append(_test_name(source, stmt))
        else:
            out.append(stmt)
    return out, names


def instrument(source: str, path: str) -> tuple[ast.Module, list[str]]:
    """The test module with each assert-bearing statement recorded; and the tests' names."""
    tree = ast.parse(source, path)
    check_names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            node.body, check_names = _instrument_body(source, node.body)
    tree.body, module_names = _instrument_body(source, tree.body)
    ast.fix_missing_locations(tree)
    return tree, module_names + check_names


def main() -> None:
    with open(sys.argv[1]) as handle:
        spec = json.load(handle)
    path = spec["test"]
    entry_point = spec.get("entry_point")
    with open(path) as handle:
        source = handle.read()
    tree, names = instrument(source, path)
    judge = Judge(spec)
    if not judge.connection.loaded:
        judge.finish(expected=names)
        return
    recorder: Recorder = judge.recorder
    namespace: dict[str, Any] = {"__name__": "__judge__", "__builtins__": builtins}
    if spec.get("prelude"):
        with open(spec["prelude"]) as handle:
            exec(compile(handle.read(), spec["prelude"], "exec"), namespace)
    if entry_point:
        namespace[entry_point] = judge.connection.attribute(entry_point)
    namespace[RECORDER] = recorder
    recorder.begin("set-up")
    try:
        exec(compile(tree, path, "exec"), namespace)
        check = namespace.get("check")
        if entry_point and callable(check):
            check(namespace[entry_point])
    except StopTests:
        pass  # early stop: the tests not run are reported as not reached
    except BaseException as exc:  # code outside any assert failed: the rest is not reached
        recorder.end("set-up", exc)
    judge.finish(expected=names)


if __name__ == "__main__":
    main()
