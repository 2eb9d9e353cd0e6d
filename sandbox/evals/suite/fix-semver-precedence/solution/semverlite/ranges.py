"""Ranges: comparators, caret and tilde, conjunctions and alternatives."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

from .version import Version, parse

_COMPARATOR = re.compile(r"^(>=|<=|>|<|=|\^|~)?(.+)$")
_OPERATORS: dict[str, Callable[[Version, Version], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "=": operator.eq,
}


def _expand(token: str) -> list[tuple[str, Version]]:
    match = _COMPARATOR.match(token)
    if match is None:
        raise ValueError(f"bad comparator {token!r}")
    op, version = match.group(1) or "=", parse(match.group(2))
    if op == "^":
        if version.major:
            upper = Version(version.major + 1, 0, 0)
        elif version.minor:
            upper = Version(0, version.minor + 1, 0)
        else:
            upper = Version(0, 0, version.patch + 1)
        return [(">=", version), ("<", upper)]
    if op == "~":
        return [(">=", version), ("<", Version(version.major, version.minor + 1, 0))]
    return [(op, version)]


def satisfies(version: str | Version, spec: str) -> bool:
    if isinstance(version, str):
        version = parse(version)
    for alternative in spec.split("||"):
        tokens = alternative.split()
        if not tokens:
            raise ValueError(f"empty alternative in range {spec!r}")
        comparators = [pair for token in tokens for pair in _expand(token)]
        if all(_OPERATORS[op](version, bound) for op, bound in comparators):
            return True
    return False
