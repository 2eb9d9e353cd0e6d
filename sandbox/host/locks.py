"""An exclusive lock on a file, shared by the processes of this machine (``flock``)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive(path: Path, on_wait: Callable[[], None]) -> Iterator[None]:
    """Hold the lock on ``path`` (created if missing); ``on_wait()`` first if another holds it."""
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait()
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
