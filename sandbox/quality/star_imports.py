"""Hidden Python tests that star-import the code under test, and the names it could shadow.

``from solution import *`` binds whatever the imported module exports over the
test's own names: in plain Python (a task's pytest run) a module whose
``__all__`` lists ``math`` or ``sorted`` replaces the test's. The platform's
judge gives such an import only the candidate's own public names, never one the
test bound or a builtin's; the findings still point these imports out, and the
``star-shadow`` probe tries the hack.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping
from typing import Final

__all__ = ["SHADOWED_BUILTINS", "shadow_names", "star_imports"]

SHADOWED_BUILTINS: Final = (
    "abs",
    "dict",
    "float",
    "int",
    "list",
    "max",
    "min",
    "round",
    "set",
    "sorted",
    "str",
    "sum",
    "tuple",
)
"""Builtins a test applies to values (``sorted(got) == sorted(want)``): worth shadowing."""

_NOT_SHADOWED: Final = frozenset({"pytest", "unittest"})


def _trees(tests: Mapping[str, str]) -> dict[str, ast.Module]:
    trees = {}
    for path, text in sorted(tests.items()):
        if path.endswith(".py"):
            try:
                trees[path] = ast.parse(text, path)
            except (SyntaxError, ValueError):
                continue  # not this check's business: the reference run shows it
    return trees


def _stars(tree: ast.Module) -> list[ast.ImportFrom]:
    return [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and node.level == 0
        and node.module
        and any(alias.name == "*" for alias in node.names)
    ]


def star_imports(tests: Mapping[str, str], modules: Collection[str]) -> list[str]:
    """``file:line`` of every module-level ``from M import *`` of one of ``modules``."""
    return [
        f"{path}:{node.lineno}"
        for path, tree in _trees(tests).items()
        for node in _stars(tree)
        if node.module in modules
    ]


def shadow_names(tests: Mapping[str, str], module: str) -> tuple[list[str], list[str]]:
    """What a star import of ``module`` could shadow in the files that do it: the modules
    those files import at module level (``import math``), then the functions and other
    names (``from math import isqrt``, :data:`SHADOWED_BUILTINS`); never the test
    frameworks or ``module``."""
    modules: set[str] = set()
    names: set[str] = set(SHADOWED_BUILTINS)
    for tree in _trees(tests).values():
        if not any(node.module == module for node in _stars(tree)):
            continue
        for node in tree.body:
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if alias.name == "*" or bound in _NOT_SHADOWED | {module.split(".")[0]}:
                    continue
                (modules if isinstance(node, ast.Import) else names).add(bound)
    return sorted(modules), sorted(names - modules)
