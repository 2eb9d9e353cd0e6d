"""What a client's request must be before anything runs: text, bounded nesting, file names.

One set of checks for every way a client sends these: ``/v1/run``'s files, a
judge's test files, a session's files and a task's tree all use
:func:`check_relative_path` and :func:`check_tree` (through the pydantic types
:data:`RelativePath` and :data:`FileMap`, so a bad name is refused when the
request is validated, naming its field). :func:`lone_surrogate` finds text that
is not valid UTF-8 (JSON may escape half a surrogate pair, which no file name,
program or stream can hold); :func:`check_depth` bounds how deeply a value nests.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from sandbox.errors import InvalidRequestError, PayloadTooLargeError

MiB = 1 << 20
MAX_FILES = 256
MAX_FILES_BYTES = 32 * MiB
MAX_PATH_LEN = 1024
MAX_PATH_PART_LEN = 255
_SURROGATE = re.compile("[\ud800-\udfff]")


def _shown(path: str) -> str:
    return repr(path[:80])  # repr escapes surrogates and control characters


def check_relative_path(path: str) -> str:
    """A workspace-relative file name: valid UTF-8 text without NUL, not empty, not
    absolute, normalised (no ``.``, ``..`` or empty parts) and not absurdly long."""
    if _SURROGATE.search(path):
        raise InvalidRequestError(
            f"file path {_shown(path)} is not valid UTF-8 text (it holds a lone surrogate); "
            "send the name as text"
        )
    if not path or "\x00" in path or path.startswith("/") or len(path) > MAX_PATH_LEN:
        raise InvalidRequestError(
            f"file path {_shown(path)} must be relative, non-empty, without NUL and at most "
            f"{MAX_PATH_LEN} characters"
        )
    parts = path.split("/")
    if any(part in ("", ".", "..") or len(part) > MAX_PATH_PART_LEN for part in parts):
        raise InvalidRequestError(
            f"file path {_shown(path)} must not contain '..', '.', empty parts or parts "
            f"longer than {MAX_PATH_PART_LEN} characters"
        )
    return path


def check_tree(paths: Iterable[str]) -> None:
    """Refuse a set of file names one of which is also a directory of another (``a``, ``a/b``)."""
    names = set(paths)
    for path in sorted(names):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent in names:
                raise InvalidRequestError(
                    f"file path {_shown(parent)} is a file and also the directory of "
                    f"{_shown(path)}; rename one of them"
                )


def _checked_tree(files: dict[str, str]) -> dict[str, str]:
    check_tree(files)
    return files


RelativePath = Annotated[str, AfterValidator(check_relative_path)]
"""A field holding a workspace-relative file name (see :func:`check_relative_path`)."""

FileMap = Annotated[dict[RelativePath, str], AfterValidator(_checked_tree)]
"""A field holding files, name -> text: each name checked, and the names form a tree."""

CLASS_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""What a priority class (of a fleet's scheduling config) may be called."""

PriorityClassName = Annotated[
    str | None,
    Field(
        default=None,
        pattern=CLASS_NAME_PATTERN,
        description="On a fleet (`serve --fleet`), the priority class to run in (as the "
        "X-Priority-Class header; naming a different class in both is a 422): 422 for a class "
        "the fleet config does not know, 403 above the tenant's max_class. Left out: the "
        "header's, else the tenant's default. A single-host service ignores it, as it does "
        "the header.",
    ),
]
"""The optional ``priority_class`` field of a request body."""


def decode_files(text: Mapping[str, str], encoded: Mapping[str, str]) -> dict[str, bytes]:
    """Checked paths and contents from a request's text and base64 files (413 when too many)."""
    if len(text) + len(encoded) > MAX_FILES:
        raise PayloadTooLargeError(f"at most {MAX_FILES} files per request")
    files = {check_relative_path(path): data.encode() for path, data in text.items()}
    for path in encoded:
        check_relative_path(path)
        if path in files:
            raise InvalidRequestError(
                f"file path {_shown(path)} is in both files and files_base64; send it once"
            )
        try:
            files[path] = base64.b64decode(encoded[path], validate=True)
        except ValueError:  # binascii.Error, or a character outside ASCII
            raise InvalidRequestError(f"files_base64[{_shown(path)}] is not base64") from None
    check_tree(files)
    if sum(len(data) for data in files.values()) > MAX_FILES_BYTES:
        raise PayloadTooLargeError(f"files total more than {MAX_FILES_BYTES} bytes")
    return files


def _walk(value: Any) -> Iterable[tuple[tuple[str | int, ...], Any]]:
    """Every (path, node) of a JSON value, parents first; iterative (any depth)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        yield path, node
        if isinstance(node, dict):
            stack.extend(((*path, key), item) for key, item in node.items())
        elif isinstance(node, list):
            stack.extend(((*path, index), item) for index, item in enumerate(node))


def dotted(path: Iterable[str | int]) -> str:
    """A path into a JSON value as ``a.0.b`` (keys escaped as :func:`repr` would)."""
    return ".".join(str(part) if isinstance(part, int) else _printable(part) for part in path)


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def lone_surrogate(value: Any) -> tuple[str | int, ...] | None:
    """Where in a JSON value (a key or a string) a lone surrogate sits, or None."""
    for path, node in _walk(value):
        if isinstance(node, str) and _SURROGATE.search(node):
            return path
        if isinstance(node, dict):
            for key in node:
                if isinstance(key, str) and _SURROGATE.search(key):
                    return (*path, key)
    return None


def check_depth(value: Any, limit: int, what: str) -> Any:
    """Refuse a JSON value nested more than ``limit`` containers deep, naming where."""
    for path, node in _walk(value):
        if len(path) >= limit and isinstance(node, (list, dict)):
            where = "".join(f"[{part!r}]" for part in path[:8])
            raise InvalidRequestError(
                f"{what} is nested more than {limit} levels deep (at {what}{where}...); "
                f"flatten the value to at most {limit} levels"
            )
    return value
