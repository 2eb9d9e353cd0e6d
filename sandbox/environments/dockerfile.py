"""A task's Dockerfile: read as the builder reads it, its images resolved, refused where unsure.

Every image the build reads goes through ``resolve`` (the aliases, our images,
the tenant's own environments; see :mod:`.build`): each ``FROM`` and each
``COPY --from`` naming an image, not an earlier stage. Nothing else is
rewritten. Global ``ARG`` defaults (those before the first ``FROM``) and the
build args are substituted into a ``FROM`` image, as Docker does.

What this reader could see differently from a builder is refused rather than
guessed, so that no image reference can hide from it: parser directives
(``# escape=`` changes the line continuation, ``# syntax=`` the front end), a
byte-order mark, control characters a builder does not split lines on,
here-documents, ``ONBUILD`` (instructions run in a later build), flags on
``RUN`` (``--mount=from=<image>``, ``--network``, ``--security``), and an
``ADD`` of a URL or a git repository (the builder would fetch it from the
host's own network: put the file in the build context instead).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from sandbox.errors import InvalidRequestError

FINAL_STAGE = "sandbox_task"
_INSTRUCTION = re.compile(r"^\s*([A-Za-z]+)(?:\s+(.*?))?\s*$", re.DOTALL)
_ARG = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:=(.*?))?$")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_AS = re.compile(r"^[a-zA-Z][a-zA-Z0-9_.-]*$")
_DIRECTIVE = re.compile(r"^\s*#\s*([A-Za-z]+)\s*=")
# Characters some line splitter (Python's, Go's) treats as a line or space break and others
# do not: no Dockerfile needs them, so none is read.
_AMBIGUOUS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x85\u2028\u2029\ufeff]")
_HEREDOC = re.compile(r"<<-?\s*[\"']?[A-Za-z_]")
_FROM_FLAG = re.compile(r"--from=(\S+)")
_URL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|git@)")


@dataclass(frozen=True)
class Rewritten:
    """The Dockerfile with its images replaced, and what each was resolved to."""

    text: str
    final_stage: str
    bases: tuple[tuple[str, str], ...]  # (as written, resolved local reference)


@dataclass(frozen=True)
class _Instruction:
    line: int  # index of its first physical line
    keyword: str  # upper case
    first: str  # the rest of its first physical line
    rest: str  # the rest of the whole instruction, continuation lines joined


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


def _check_text(text: str, source: str) -> None:
    if text.startswith("\ufeff"):
        raise InvalidRequestError(
            f"{source} starts with a byte-order mark; save it as UTF-8 without one"
        )
    bad = _AMBIGUOUS.search(text)
    if bad is not None:
        number = text.count("\n", 0, bad.start()) + 1
        raise InvalidRequestError(
            f"{source} line {number}: control character U+{ord(bad.group()):04X}, which builders "
            "split lines on differently; remove it"
        )
    for index, line in enumerate(text.split("\n")):
        if not line.strip():
            continue
        directive = _DIRECTIVE.match(line)
        if directive is None:
            break  # directives stand before any other line; later ones are comments
        raise InvalidRequestError(
            f"{source} line {index + 1}: the parser directive "
            f"'{directive.group(1).lower()}=' is not taken (it changes how the file is read); "
            "remove it and write the file with the default escape character '\\'"
        )


def _instructions(lines: list[str]) -> Iterator[_Instruction]:
    """The logical instructions, as Docker joins them: a trailing ``\\`` continues the
    instruction; comment and blank lines inside one neither end nor extend it."""
    start: int | None = None
    parts: list[str] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if start is None:
            start = index
        continued = stripped.endswith("\\")
        parts.append(stripped[:-1] if continued else stripped)
        if not continued:
            yield _parse(start, lines[start], " ".join(parts))
            start, parts = None, []
    if start is not None:
        yield _parse(start, lines[start], " ".join(parts))


def _parse(index: int, first_line: str, joined: str) -> _Instruction:
    match = _INSTRUCTION.match(joined)
    first = _INSTRUCTION.match(first_line.rstrip().removesuffix("\\"))
    if match is None or first is None:
        raise InvalidRequestError(f"line {index + 1}: cannot read {first_line.strip()[:80]!r}")
    return _Instruction(index, match.group(1).upper(), first.group(2) or "", match.group(2) or "")


def _sources(rest: str) -> list[str]:
    """The sources of a ``COPY``/``ADD`` (its last word is the destination)."""
    if rest.startswith("["):
        try:
            words = json.loads(rest)
        except ValueError:
            return []
        return [str(w) for w in words[:-1]] if isinstance(words, list) else []
    words = [w for w in rest.split() if not w.startswith("--")]
    return words[:-1]


def rewrite_from_lines(
    text: str,
    *,
    resolve: Callable[[str], str],
    build_args: Mapping[str, str],
    source: str,
) -> Rewritten:
    """Replace each image the build reads by ``resolve(image)``; name the last stage.

    ``resolve`` maps an image as written (variables substituted) to the local
    reference to build from, or raises the refusal. The last stage gets the
    name :data:`FINAL_STAGE` unless it has one.
    """
    _check_text(text, source)
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    values: dict[str, str] = {}
    stages: list[str] = []
    bases: list[tuple[str, str]] = []
    last_from: int | None = None
    final = FINAL_STAGE

    def image_of(image: str) -> str:
        """An earlier stage (by name or index) as it is, else the resolved image."""
        if image.lower() in stages or (image.isdigit() and int(image) < len(stages)):
            return image
        resolved = resolve(image)
        bases.append((image, resolved))
        return resolved

    for ins in _instructions(lines):
        where = f"{source} line {ins.line + 1}"
        if ins.keyword in ("RUN", "COPY", "ADD") and _HEREDOC.search(ins.rest):
            raise InvalidRequestError(
                f"{where}: here-documents (<<EOF) are not taken; put the file in the build "
                "context and COPY it"
            )
        if ins.keyword == "ONBUILD":
            raise InvalidRequestError(
                f"{where}: ONBUILD is not taken (its instructions would run in another "
                "build); write them in the Dockerfile that needs them"
            )
        if ins.keyword == "RUN" and ins.rest.startswith("--"):
            raise InvalidRequestError(
                f"{where}: flags on RUN ({ins.rest.split()[0][:40]}) are not taken; write "
                "the command alone"
            )
        if ins.keyword in ("COPY", "ADD"):
            fetched = [s for s in _sources(ins.rest) if _URL.match(s)]
            if ins.keyword == "ADD" and fetched:
                raise InvalidRequestError(
                    f"{where}: ADD {fetched[0][:80]} would be fetched by the builder from the "
                    "host's own network; download it into the build context and COPY it"
                )
            if _FROM_FLAG.search(ins.rest) is not None:
                line = lines[ins.line]
                flag = _FROM_FLAG.search(line)
                if flag is None:
                    raise InvalidRequestError(f"{where}: write --from= on the {ins.keyword} line")
                image = image_of(_unquote(flag.group(1)))
                lines[ins.line] = line[: flag.start(1)] + image + line[flag.end(1) :]
            continue
        if ins.keyword == "ARG" and last_from is None:
            arg = _ARG.match(ins.rest)
            if arg:
                name, default = arg.group(1), arg.group(2)
                if name in build_args:
                    values[name] = build_args[name]
                elif default is not None:
                    values[name] = _unquote(default)
            continue
        if ins.keyword != "FROM":
            continue
        if ins.first != ins.rest:
            raise InvalidRequestError(f"{where}: write the FROM instruction on one line")
        words = ins.rest.split()
        flags = [w for w in words if w.startswith("--")]
        rest = [w for w in words if not w.startswith("--")]
        if len(rest) not in (1, 3) or (len(rest) == 3 and rest[1].lower() != "as"):
            raise InvalidRequestError(
                f"{where}: cannot read {lines[ins.line].strip()!r}; write "
                "FROM [--platform=...] <image> [AS <name>]"
            )
        if any(not f.startswith("--platform=") for f in flags):
            raise InvalidRequestError(f"{where}: only --platform is understood on FROM")
        stage = rest[2] if len(rest) == 3 else None
        if stage is not None and not _AS.fullmatch(stage):
            raise InvalidRequestError(f"{where}: bad stage name {stage!r}")
        resolved = image_of(_substitute(rest[0], values, source))
        keyword = lines[ins.line].split(None, 1)[0]
        pieces = [keyword, *flags, resolved]
        if stage is not None:
            pieces += ["AS", stage]
        stages.append((stage or f"\0{len(stages)}").lower())
        lines[ins.line] = " ".join(pieces)
        last_from = ins.line
        final = stage or FINAL_STAGE
    if last_from is None:
        raise InvalidRequestError(f"{source}: no FROM instruction; start it with FROM <image>")
    if final == FINAL_STAGE:
        lines[last_from] += f" AS {FINAL_STAGE}"
    return Rewritten("\n".join(lines) + "\n", final, tuple(bases))
