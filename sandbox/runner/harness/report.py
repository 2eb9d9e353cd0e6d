"""Per-test outcomes, classified on the judge side, and the report the host reads.

The report is one JSON object written to the judge's original stdout (every
other print goes to stderr) after the last test ran, with ``"complete": true``:
a judge that never gets there has produced no evidence, and the host scores
that as a failure.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any

from remote import CandidateCrashed, CandidateTimeout, Connection, raised_by_candidate

MESSAGE_CHARS = 500


def classify(exc: BaseException) -> str:
    """The verdict an exception stands for."""
    if isinstance(exc, CandidateTimeout):
        return "timeout"
    if isinstance(exc, CandidateCrashed):
        return "crashed"
    if raised_by_candidate(exc):
        return "runtime_error"
    if isinstance(exc, AssertionError):
        return "wrong_answer"
    return "wrong_answer" if isinstance(exc, TypeError | ValueError) else "runtime_error"


class StopTests(BaseException):
    """Raised at the next test once one failed and the run stops early."""


class Recorder:
    """Collects one entry per test, in order; with ``early_stop`` the first failure ends it."""

    def __init__(self, early_stop: bool = False) -> None:
        self.tests: list[dict[str, Any]] = []
        self.early_stop = early_stop
        self.failed = False
        self._started: dict[str, float] = {}

    def begin(self, name: str) -> None:
        if self.early_stop and self.failed:
            raise StopTests
        self._started[name] = time.perf_counter()

    def end(self, name: str, exc: BaseException | None, **extra: Any) -> None:
        elapsed = time.perf_counter() - self._started.pop(name, time.perf_counter())
        entry: dict[str, Any] = {"name": name, "time_s": round(elapsed, 6), **extra}
        if exc is None:
            entry["verdict"] = "passed"
        else:
            entry["verdict"] = classify(exc)
            entry["message"] = f"{type(exc).__name__}: {exc}"[:MESSAGE_CHARS]
            self.failed = True
        self.tests.append(entry)


class Judge:
    """What every judge program does first and last: connect, then report."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._report_fd = os.dup(1)
        os.dup2(2, 1)  # test output goes to stderr; stdout carries only the report
        sys.stdout = sys.stderr
        self.recorder = Recorder(bool(spec.get("early_stop")))
        call_timeout_s = float(spec["call_timeout_s"])
        load_timeout_s = float(spec["load_timeout_s"])
        self.connection = Connection(socket.socket(fileno=3), call_timeout_s, load_timeout_s)

    def finish(self, **extra: Any) -> None:
        report = {
            "complete": True,
            "loaded": self.connection.loaded,
            "load_error": self.connection.load_error,
            "tests": self.recorder.tests,
            **extra,
        }
        data = json.dumps(report).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._report_fd, view) :]
        os.close(self._report_fd)
