"""Run an agent task's hidden pytest files; the verdict goes to the runner, not to a file.

    python3 -I pytest_channel.py [PYTEST ARGS...]

Started by the platform (never by a task), as the judge uid in ``/judge/tests``,
with two descriptors from the runner (see :mod:`runner.execute`): fd 3 holds
this run's nonce (random, made by the runner for this run; never in the
environment, the arguments or a file) and fd 4 is a pipe only the runner reads.

Before pytest starts, hence before any ``conftest.py``, any test module and any
of the agent's code they import, this module reads the nonce and closes fd 3,
marks fd 4 close-on-exec and makes the process non-dumpable: programs the tests
start (the agent's scripts run as the same uid) inherit neither descriptor and
can neither read this process's memory nor open its descriptors through
``/proc``. Then pytest runs with :class:`Channel` registered as it starts (the
same as ``-p``, ahead of every conftest). At the end of the session the plugin
writes one JSON report to fd 4: the nonce, pytest's exit status, the collected
tests, the collection errors and every test's outcome. The runner takes only
that report, and only with the right nonce: a report the agent's code writes
anywhere (``/judge/report.xml`` or any other file) means nothing, and no report
(``os._exit(0)`` at import or in a test, a killed pytest) is not a pass.
``sys.exit(0)`` at import is a collection error; ``pytest.exit(returncode=0)``
in a test leaves tests without an outcome: neither is a pass either. A plain
test function counts as passed only if pytest's own runner called it (the plugin
sees the call through ``pytest_pyfunc_call``) and ``pytest.Function.runtest`` is
still the one pytest started with: agent code that swaps the runner for a no-op
at import gets errors, not passes.

Residual risk, said plainly: the agent's modules the tests import run *inside*
this process, with its memory. Code that targets this very harness can find the
nonce there (or patch pytest's hooks, or write to fd 4 itself) and forge a
passing report. The channel shuts out files, exit statuses and every other
process; it cannot shut out the process it runs in. A task that must hold
against that runs the agent's code in a process of its own (a program the tests
start) and checks its output, rather than importing it.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

import pytest

NONCE_FD = 3
REPORT_FD = 4
MAX_NONCE_BYTES = 256
PR_SET_DUMPABLE = 4

PASSED, SKIPPED, FAILED, ERROR = "passed", "skipped", "failed", "error"
_RANK = {PASSED: 0, SKIPPED: 1, FAILED: 2, ERROR: 3}


class Channel:
    """A pytest plugin: every test's outcome, sent once with the nonce at session end."""

    def __init__(self, nonce: str, report_fd: int) -> None:
        self._nonce = nonce
        self._report_fd = report_fd
        self.collected: list[str] = []
        self.collect_errors: list[str] = []
        self.outcomes: dict[str, str] = {}
        # Taken before any test module (or the agent's code it imports) is loaded.
        self._function = pytest.Function
        self._runtest = pytest.Function.runtest
        self._plain: set[str] = set()
        self._called: set[str] = set()

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.collect_errors.append(report.nodeid or "<session>")

    def pytest_collection_finish(self, session: Any) -> None:
        self.collected = [item.nodeid for item in session.items]
        self._plain = {item.nodeid for item in session.items if type(item) is self._function}

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: Any) -> None:
        """Note that the test function itself is being called (then pytest calls it)."""
        self._called.add(pyfuncitem.nodeid)

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call":
            outcome = FAILED if report.failed else SKIPPED if report.skipped else PASSED
            if outcome == PASSED and not self._ran(report.nodeid):
                outcome = ERROR  # "passed" without its function ever being called
        elif report.failed:  # set-up or teardown
            outcome = ERROR
        elif report.skipped:  # skipped in its set-up (a skip mark, a fixture's skip)
            outcome = SKIPPED
        else:
            return
        known = self.outcomes.get(report.nodeid)
        if known is None or _RANK[outcome] > _RANK[known]:
            self.outcomes[report.nodeid] = outcome

    def _ran(self, nodeid: str) -> bool:
        """A plain test function passes only if pytest's own runner called it."""
        if nodeid not in self._plain:
            return True  # unittest cases, doctests: not run through pytest_pyfunc_call
        return nodeid in self._called and self._function.runtest is self._runtest

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        report = {
            "nonce": self._nonce,
            "exitstatus": int(exitstatus),
            "collected": self.collected,
            "collect_errors": self.collect_errors,
            "outcomes": self.outcomes,
        }
        self._send(json.dumps(report).encode())

    def _send(self, data: bytes) -> None:
        fd, self._report_fd = self._report_fd, -1
        if fd < 0:
            return  # a second session in this process (pytester): the first one counts
        with open(fd, "wb") as pipe:  # writes it all, then closes fd 4
            pipe.write(data)


def _read_nonce(fd: int) -> str:
    chunks = []
    try:
        while chunk := os.read(fd, MAX_NONCE_BYTES):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("ascii")


def _not_dumpable() -> None:
    """Keep other processes of this uid out of this one's memory and descriptors."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def main(args: list[str]) -> int:
    nonce = _read_nonce(NONCE_FD)
    os.set_inheritable(REPORT_FD, False)
    _not_dumpable()
    # As ``python3 -m pytest`` would: the working directory first on the path
    # (``-I`` kept this harness's own directory off it).
    sys.path.insert(0, os.getcwd())
    return int(pytest.main(args, plugins=[Channel(nonce, REPORT_FD)]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
