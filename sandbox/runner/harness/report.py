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
    """Collects one entry per test, in order; with ``early_stop`` the first failure ends it.

    A test that ends after the candidate's process died, exited or timed out ends
    with that verdict, whatever the test itself caught (``except BaseException``,
    ``pytest.raises(BaseException)``): the candidate's end is never a pass.
    """

    def __init__(self, connection: Connection, early_stop: bool = False) -> None:
        self.tests: list[dict[str, Any]] = []
        self.connection = connection
        self.early_stop = early_stop
        self.failed = False
        self._end_recorded = False
        self._started: dict[str, float] = {}

    def begin(self, name: str) -> None:
        if self.early_stop and self.failed:
            raise StopTests
        self._started[name] = time.perf_counter()

    def end(self, name: str, exc: BaseException | None, **extra: Any) -> None:
        elapsed = time.perf_counter() - self._started.pop(name, time.perf_counter())
        entry: dict[str, Any] = {"name": name, "time_s": round(elapsed, 6), **extra}
        if self.connection.dead is not None:
            exc = self.connection.dead
            self._end_recorded = True
        if exc is None:
            entry["verdict"] = "passed"
        else:
            entry["verdict"] = classify(exc)
            entry["message"] = f"{type(exc).__name__}: {exc}"[:MESSAGE_CHARS]
            self.failed = True
        self.tests.append(entry)

    def entries(self) -> list[dict[str, Any]]:
        """Every test's entry, and one more, failed, if the candidate ended where no test saw
        it (code between or after the tests swallowed it)."""
        dead = self.connection.dead
        if dead is not None and self.connection.loaded and not self._end_recorded:
            message = f"{type(dead).__name__}: {dead}"[:MESSAGE_CHARS]
            self.tests.append({"name": "candidate", "verdict": classify(dead), "message": message})
            self._end_recorded = True
        return self.tests


class Judge:
    """What every judge program does first and last: connect, then report."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._report_fd = os.dup(1)
        os.dup2(2, 1)  # test output goes to stderr; stdout carries only the report
        sys.stdout = sys.stderr
        call_timeout_s = float(spec["call_timeout_s"])
        load_timeout_s = float(spec["load_timeout_s"])
        self.connection = Connection(socket.socket(fileno=3), call_timeout_s, load_timeout_s)
        self.recorder = Recorder(self.connection, bool(spec.get("early_stop")))

    def finish(self, **extra: Any) -> None:
        report = {
            "complete": True,
            "loaded": self.connection.loaded,
            "load_error": self.connection.load_error,
            "tests": self.recorder.entries(),
            **extra,
        }
        data = json.dumps(report).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self._report_fd, view) :]
        os.close(self._report_fd)
