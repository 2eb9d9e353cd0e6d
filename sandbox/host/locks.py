"""Locks on a file, shared by the processes of this machine (``flock``)."""

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


@contextlib.contextmanager
def shared(path: Path) -> Iterator[None]:
    """Hold a shared lock on ``path`` (created if missing), waiting for an exclusive one."""
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def exclusive_now(path: Path) -> Iterator[bool]:
    """Hold the exclusive lock on ``path`` if nobody holds it now; yields whether it does."""
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
