"""Reading a task's Dockerfile: does it only lay files over one of our built-in images?

A Dockerfile that is exactly ``FROM`` one of our images (:data:`BUILTIN_IMAGES`),
``WORKDIR``, ``COPY`` from its build context into the working directory, ``ENV``
and ``LABEL`` describes a built-in image with a starting workspace: the copied
files become the task's ``files`` (the working directory is ``/workspace``) and
the task runs today. Any other instruction (``RUN``, ``USER``, a second
``FROM``, ``ADD``, a ``COPY`` out of the context or outside the working
directory ...) needs the environment to be built, and :func:`map_dockerfile`
says which line.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ..tasks import BUILTIN_IMAGES, MAX_FILE_BYTES, TaskError, read_regular_file, read_tree

__all__ = ["DockerfileMapping", "bundling_base", "map_dockerfile", "workdir_of"]

MAX_DOCKERFILE_BYTES: Final = 256 * 1024
_IGNORED: Final = frozenset({"LABEL"})


@dataclass
class DockerfileMapping:
    """What a Dockerfile says: its base image and working directory, and its files if it maps."""

    base: str
    workdir: str | None
    image: str | None = None
    """Our built-in image it maps onto, or None (then ``unmapped`` says why)."""
    unmapped: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    executable: set[str] = field(default_factory=set)
    env: dict[str, str] = field(default_factory=dict)


def _instructions(text: str) -> list[tuple[int, str, str]]:
    """``(line, KEYWORD, arguments)``, continuation lines joined, comments dropped."""
    out: list[tuple[int, str, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, rest = full.partition(" ")
        out.append((start, keyword.upper(), rest.strip()))
    if pending.strip():
        keyword, _, rest = pending.strip().partition(" ")
        out.append((start, keyword.upper(), rest.strip()))
    return out


def _env_pairs(arguments: str) -> dict[str, str]:
    words = shlex.split(arguments)
    if words and "=" not in words[0]:  # the legacy form: ENV KEY value with spaces
        return {words[0]: " ".join(words[1:])}
    return dict(word.split("=", 1) for word in words if "=" in word)


def workdir_of(text: str) -> str | None:
    """The last absolute ``WORKDIR`` of a Dockerfile's text (None when it sets none)."""
    found = None
    for _, keyword, arguments in _instructions(text):
        if keyword == "WORKDIR" and arguments.startswith("/"):
            found = posixpath.normpath(arguments)
    return found


def _copy(
    mapping: DockerfileMapping,
    context: Path,
    arguments: str,
    where: str,
    current: str,
    exclude: frozenset[str],
) -> str | None:
    """Lay a ``COPY src... dest`` (relative to ``current``) into ``mapping.files``; why not."""
    workdir = mapping.workdir or "/"
    if workdir == "/":
        return f"{where}: COPY without a WORKDIR (the files would land in /)"
    words = shlex.split(arguments)
    if any(w.startswith("--") for w in words) or len(words) < 2:
        return f"{where}: COPY with options or without a destination"
    *sources, dest = words
    target = dest if dest.startswith("/") else posixpath.join(current, dest)
    target = posixpath.normpath(target)
    if target != workdir and not target.startswith(workdir.rstrip("/") + "/"):
        return f"{where}: COPY to {dest}, outside the working directory {workdir}"
    below = posixpath.relpath(target, workdir)
    below = "" if below == "." else below + "/"
    into_dir = dest.endswith("/") or len(sources) > 1 or dest in (".", "./")
    for source in sources:
        clean = posixpath.normpath(source)
        if clean.startswith("..") or clean.startswith("/") or any(c in clean for c in "*?["):
            return f"{where}: COPY {source}: outside the build context or a pattern"
        if clean.split("/")[0] in exclude:
            return f"{where}: COPY {source}: the task's own files (tests, solution) into the image"
        path = context / clean
        try:
            info = path.lstat()
        except FileNotFoundError:
            raise TaskError(
                f"line {where}: COPY {source}: no such file in the build context",
                source=str(context),
            ) from None
        if stat.S_ISDIR(info.st_mode):
            tree, executable = read_tree(context, clean, required=False)
            if clean == ".":
                tree = {p: d for p, d in tree.items() if p.split("/")[0] not in exclude}
            for relative, data in tree.items():
                mapping.files[below + relative] = data
            mapping.executable |= {below + r for r in executable}
        else:
            data, is_exec = read_regular_file(path, str(path), MAX_FILE_BYTES)
            name = below + posixpath.basename(clean) if into_dir else below.rstrip("/")
            if not name:
                return f"{where}: COPY of a file onto the working directory itself"
            mapping.files[name] = data
            if is_exec:
                mapping.executable.add(name)
    return None


def _read(dockerfile: Path) -> list[tuple[int, str, str]]:
    raw, _ = read_regular_file(dockerfile, str(dockerfile), MAX_DOCKERFILE_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TaskError("not UTF-8; save it as UTF-8", source=str(dockerfile)) from None
    instructions = _instructions(text)
    if not instructions or instructions[0][1] != "FROM" or not instructions[0][2]:
        raise TaskError(
            "does not start with FROM; name the base image first", source=str(dockerfile)
        )
    return instructions


def bundling_base(dockerfile: Path) -> str | None:
    """The base image of a separate verifier's ``tests/Dockerfile`` that only bundles the
    tests into it (``COPY``, ``WORKDIR``, ``LABEL``); None when it builds more."""
    instructions = _read(dockerfile)
    if any(keyword not in ("COPY", "WORKDIR", "LABEL") for _, keyword, _ in instructions[1:]):
        return None
    return instructions[0][2].split()[0]


def map_dockerfile(
    dockerfile: Path,
    context: Path,
    *,
    workdir: str | None,
    exclude: frozenset[str] = frozenset(),
) -> DockerfileMapping:
    """Read ``dockerfile``; map it onto a built-in image when it only lays files over one.

    ``workdir`` overrides the Dockerfile's own (Harbor's ``[environment] workdir``);
    ``exclude`` names top-level entries of the context that are never copied
    into the image (a Terminal-Bench task's tests and solution).
    """
    raw, _ = read_regular_file(dockerfile, str(dockerfile), MAX_DOCKERFILE_BYTES)
    instructions = _read(dockerfile)
    base = instructions[0][2].split()[0]
    final = workdir_of(raw.decode("utf-8"))
    mapping = DockerfileMapping(base=base, workdir=workdir or final)
    image = BUILTIN_IMAGES.get(base)
    if image is None:
        mapping.unmapped = f"FROM {base} is not one of our built-in images"
        return mapping
    current = "/"
    for number, keyword, arguments in instructions[1:]:
        where = f"{os.path.basename(dockerfile)}:{number}"
        if keyword == "WORKDIR":
            current = posixpath.normpath(posixpath.join(current, arguments))
        elif keyword == "ENV":
            mapping.env.update(_env_pairs(arguments))
        elif keyword == "COPY":
            why = _copy(mapping, context, arguments, where, current, exclude)
            if why is not None:
                mapping.unmapped = why
                return mapping
        elif keyword not in _IGNORED:
            mapping.unmapped = f"{where}: {keyword} needs the image to be built"
            return mapping
    mapping.image = image
    return mapping
