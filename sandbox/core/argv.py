"""Paths from clients (and tasks) as command-line words that no command reads as an option.

A path that reaches a program's argv as ``-delete`` or ``--help`` is an option of
that program, not a path. Every such path goes through :func:`path_arg` (or
:func:`shell_command` for a ``bash -c`` line), which makes it start with ``/`` or
``./``: a word no option parser takes for an option.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable

from sandbox.errors import InvalidRequestError


def path_arg(path: str) -> str:
    """``path`` as one argv element that is never an option.

    An absolute path comes back normalised (``/workspace/../tmp`` is ``/tmp``); a
    relative one is prefixed with ``./`` (``-delete`` is ``./-delete``), so it is still
    relative to the command's working directory. The empty path and NUL are refused.
    """
    if not path or "\x00" in path:
        raise InvalidRequestError(f"path {path[:80]!r} must be non-empty and without NUL")
    if path.startswith("/"):
        return posixpath.normpath(path)
    return "./" + path


def shell_command(*words: str, paths: Iterable[str]) -> str:
    """A ``bash -c`` line running ``words -- paths``, each quoted, each path a :func:`path_arg`."""
    return shlex.join([*words, "--", *(path_arg(path) for path in paths)])
