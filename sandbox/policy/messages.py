"""Pydantic validation errors rendered as :class:`~sandbox.errors.PolicyError`: the file, the
dotted key and what to change (the allowed keys, the close match, the bounds).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ValidationError,
)

from sandbox.errors import PolicyError

from .keys import _dotted, _KeyedValueError, _KeyPath, _Origins, _show
from .model import Policy


def _without_none(annotation: Any) -> Any:
    """``X | None`` -> ``X``; any other annotation as it is."""
    if get_origin(annotation) in (Union, UnionType):
        kept = [a for a in get_args(annotation) if a is not type(None)]
        if len(kept) == 1:
            return kept[0]
    return annotation


def _allowed_keys(loc: Sequence[Any], root: type[BaseModel]) -> list[str] | None:
    """The keys ``root`` accepts at the mapping that holds ``loc[-1]``.

    Walks nested models, lists and tuples of models (an index in ``loc``) and mappings
    of names to models (a name in ``loc``).
    """
    annotation: Any = root
    for part in loc[:-1]:
        annotation = _without_none(annotation)
        origin = get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return None
            annotation = field.annotation
        elif origin in (tuple, list) and isinstance(part, int):
            annotation = get_args(annotation)[0]
        elif origin in (dict, Mapping) and isinstance(part, str):
            annotation = get_args(annotation)[1]
        else:
            return None
    annotation = _without_none(annotation)
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return None
    return [k for k in annotation.model_fields if not (annotation is Policy and k == "name")]


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _describe(error: Mapping[str, Any], root: type[BaseModel]) -> str:
    """Turn one pydantic error into a message that says what to change."""
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    loc = error["loc"]
    got = f"got {_kind(value)} {_show(value)}"
    if kind == "extra_forbidden":
        key = str(loc[-1])
        allowed = _allowed_keys(loc, root) or []
        close = difflib.get_close_matches(key, allowed, n=1)
        did_you_mean = f"; did you mean {close[0]!r}?" if close else ""
        return (
            f"unknown key {key!r}; the keys allowed here are {', '.join(allowed)}"
            f"{did_you_mean} (remove it or fix its spelling)"
        )
    if kind == "missing":
        return "is required here; add it"
    if kind == "int_type":
        hint = ""
        if isinstance(value, str):
            hint = "; write the number without quotes"
        elif isinstance(value, float):
            hint = "; write a whole number, without a decimal point"
        return f"expected a whole number, {got}{hint}"
    if kind == "float_type":
        hint = "; write the number without quotes" if isinstance(value, str) else ""
        return f"expected a number, {got}{hint}"
    if kind == "finite_number":
        return f"expected a finite number, {got}"
    if kind == "bool_type":
        return f"expected true or false, {got}"
    if kind == "string_type":
        return f"expected a string, {got}; put the value in quotes"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected')}, {got}"
    if kind in {"less_than_equal", "less_than"}:
        bound = ctx.get("le", ctx.get("lt"))
        return f"{_show(value)} is above the maximum {_show(bound)}; use at most {_show(bound)}"
    if kind in {"greater_than_equal", "greater_than"}:
        bound = ctx.get("ge", ctx.get("gt"))
        return f"{_show(value)} is below the minimum {_show(bound)}; use at least {_show(bound)}"
    if kind == "too_long":
        return (
            f"has {ctx.get('actual_length')} entries; the maximum is {ctx.get('max_length')}; "
            "remove some"
        )
    if kind == "too_short":
        return (
            f"has {ctx.get('actual_length')} entries; at least {ctx.get('min_length')} are "
            "needed; add some"
        )
    if kind == "string_pattern_mismatch":
        return f"{_show(value)} does not match {ctx.get('pattern')!r}; rename it to match"
    if kind in {"model_type", "model_attributes_type", "dict_type", "mapping_type"}:
        return f"expected a mapping of keys, {got}"
    if kind in {"tuple_type", "list_type", "iterable_type"}:
        return f"expected a list, {got}"
    if kind == "value_error":
        return str(ctx.get("error", error.get("msg", "")))
    return str(error.get("msg", "is invalid"))


def _error_location(error: Mapping[str, Any]) -> _KeyPath:
    loc: list[str | int] = [p for p in error["loc"] if p != "[key]"]
    exc = (error.get("ctx") or {}).get("error")
    if isinstance(exc, _KeyedValueError):
        loc.extend(exc.suffix)
    return tuple(loc)


def _policy_error(
    exc: ValidationError, origins: _Origins, default_source: str, root: type[BaseModel] = Policy
) -> PolicyError:
    """Build one :class:`PolicyError` from a pydantic error, naming the right file."""
    errors = exc.errors()
    first = errors[0]
    loc = _error_location(first)
    source = default_source
    for n in range(len(loc), 0, -1):
        if loc[:n] in origins:
            source = origins[loc[:n]]
            break
    message = _describe(first, root)
    if len(errors) > 1:
        others = "; ".join(
            f"{_dotted(_error_location(e))}: {_describe(e, root)}" for e in errors[1:6]
        )
        more = f" (and {len(errors) - 6} more)" if len(errors) > 6 else ""
        message += f". Also: {others}{more}"
    return PolicyError(message, source=source, key=_dotted(loc))


def config_error(exc: ValidationError, *, source: str, model: type[BaseModel]) -> PolicyError:
    """A config file's validation error (``model`` its root) as a :class:`PolicyError`.

    The same rendering policies get: the file, the dotted key, what to change.
    """
    return _policy_error(exc, {}, source, model)
