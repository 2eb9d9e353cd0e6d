"""A Dockerfile's ``FROM`` lines: read, resolved through the aliases, rewritten.

Only ``FROM`` instructions are touched; every other line is kept as written.
Global ``ARG`` defaults (those before the first ``FROM``) and the build args
are substituted into a ``FROM`` image, as Docker does. A ``FROM`` naming an
earlier stage is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sandbox.errors import InvalidRequestError

FINAL_STAGE = "sandbox_task"
_FROM = re.compile(r"^(\s*FROM\s+)(.*?)\s*$", re.IGNORECASE)
_ARG = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(.*?))?\s*$", re.IGNORECASE)
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_AS = re.compile(r"^[a-zA-Z][a-zA-Z0-9_.-]*$")


@dataclass(frozen=True)
class Rewritten:
    """The Dockerfile with its ``FROM`` images replaced, and what each was resolved to."""

    text: str
    final_stage: str
    bases: tuple[tuple[str, str], ...]  # (as written, resolved local reference)


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _substitute(image: str, values: Mapping[str, str], source: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise InvalidRequestError(
                f"{source}: FROM {image} uses ${name}, which has no value; give the ARG a "
                "default before the first FROM or pass it as a build arg"
            )
        return values[name]

    return _VARIABLE.sub(replace, image)


def rewrite_from_lines(
    text: str,
    *,
    resolve: Callable[[str], str],
    build_args: Mapping[str, str],
    source: str,
) -> Rewritten:
    """Replace each ``FROM`` image by ``resolve(image)``; name the last stage.

    ``resolve`` maps an image as written (variables substituted) to the local
    reference to build from, or raises the refusal. The last stage gets the
    name :data:`FINAL_STAGE` unless it has one.
    """
    lines = text.splitlines()
    values: dict[str, str] = {}
    stages: set[str] = set()
    bases: list[tuple[str, str]] = []
    last_from: int | None = None
    final = FINAL_STAGE
    continued = False
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):  # neither starts nor ends an instruction
            continue
        starts_instruction = not continued
        continued = stripped.endswith("\\")
        if not starts_instruction:
            continue
        if last_from is None:
            arg = _ARG.match(line)
            if arg:
                name, default = arg.group(1), arg.group(2)
                if name in build_args:
                    values[name] = build_args[name]
                elif default is not None:
                    values[name] = _unquote(default)
                continue
        match = _FROM.match(line)
        if not match:
            continue
        if continued:
            raise InvalidRequestError(
                f"{source} line {index + 1}: write the FROM instruction on one line"
            )
        words = match.group(2).split()
        flags = [w for w in words if w.startswith("--")]
        rest = [w for w in words if not w.startswith("--")]
        if len(rest) not in (1, 3) or (len(rest) == 3 and rest[1].lower() != "as"):
            raise InvalidRequestError(
                f"{source} line {index + 1}: cannot read {line.strip()!r}; write "
                "FROM [--platform=...] <image> [AS <name>]"
            )
        if any(not f.startswith("--platform=") for f in flags):
            raise InvalidRequestError(
                f"{source} line {index + 1}: only --platform is understood on FROM"
            )
        image = _substitute(rest[0], values, source)
        stage = rest[2] if len(rest) == 3 else None
        if stage is not None and not _AS.fullmatch(stage):
            raise InvalidRequestError(f"{source} line {index + 1}: bad stage name {stage!r}")
        if image.lower() in stages:
            resolved = image
        else:
            resolved = resolve(image)
            bases.append((image, resolved))
        pieces = [match.group(1).rstrip(), *flags, resolved]
        if stage is not None:
            pieces += ["AS", stage]
            stages.add(stage.lower())
        lines[index] = " ".join(pieces)
        last_from = index
        final = stage or FINAL_STAGE
    if last_from is None:
        raise InvalidRequestError(f"{source}: no FROM instruction; start it with FROM <image>")
    if final == FINAL_STAGE:
        lines[last_from] += f" AS {FINAL_STAGE}"
    return Rewritten("\n".join(lines) + "\n", final, tuple(bases))
