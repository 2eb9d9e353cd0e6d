"""Nothing the service has told a client is missing from the audit log after ``kill -9``.

A real ``sandbox serve`` with an audit log of its own: a client reads some answers
(lines of a streamed batch, or ``/v1/run`` responses) and the service is killed
with SIGKILL at once, with no chance to write anything out. Every answer the client
received must then be in the log (found by the code's SHA-256, each item's code
being unique), and the hash chain must verify, read with ``sandbox audit``.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandbox.service.platform import STATE_DIR_ENV
from tests.conftest import SANDBOX_BIN, Service

pytestmark = pytest.mark.docker

TESTS = {"kind": "function", "entry_point": "square", "cases": [{"args": [3], "expected": 9}]}


def square(n: int) -> str:
    return f"# submission {n}\ndef square(x):\n    return x * x\n"


@pytest.fixture
def state(tmp_path: Path) -> Iterator[tuple[Service, Path]]:
    """A service whose state (the audit log) lives in a folder of this test's own."""
    state_dir = tmp_path / "state"
    svc = Service(log_dir=tmp_path, env={STATE_DIR_ENV: str(state_dir)})
    try:
        svc.wait_ready()
        yield svc, state_dir / "audit.db"
    finally:
        svc.stop()


def audit(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SANDBOX_BIN), "audit", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def logged_code_hashes(db: Path, kind: str) -> set[str]:
    """The code hashes of ``kind`` records, read with ``sandbox audit`` (chain verified)."""
    verified = audit(db, "verify")
    assert verified.returncode == 0 and "intact" in verified.stdout, verified
    queried = audit(db, "query", "--kind", kind, "--json", "--limit", "1000")
    assert queried.returncode == 0, queried
    return {json.loads(line)["code_sha256"] for line in queried.stdout.splitlines()}


def sha(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def test_streamed_batch_lines_survive_kill_9(state: tuple[Service, Path]) -> None:
    svc, db = state
    codes = [square(n) for n in range(8)]
    items = [{"id": str(n), "code": code, "tests": TESTS} for n, code in enumerate(codes)]
    received: list[dict[str, Any]] = []
    with (
        httpx.Client(base_url=svc.url, timeout=180) as client,
        client.stream("POST", "/v1/evaluate", json={"items": items, "concurrency": 1}) as stream,
    ):
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if line:
                received.append(json.loads(line))
            if len(received) == 4:
                svc.process.send_signal(signal.SIGKILL)
                break
    svc.process.wait(timeout=30)

    assert len(received) == 4 and all(line["result"]["reward"] == 1.0 for line in received)
    told = {sha(codes[int(line["id"])]) for line in received}
    missing = told - logged_code_hashes(db, "judge")
    assert not missing, f"{len(missing)} of the 4 answered items are not in the audit log"


def test_run_responses_survive_kill_9(state: tuple[Service, Path]) -> None:
    svc, db = state
    codes = [f"print({n})" for n in range(4)]
    with httpx.Client(base_url=svc.url, timeout=120) as client:
        for n, code in enumerate(codes):
            response = client.post("/v1/run", json={"code": code})
            assert response.status_code == 200 and response.json()["stdout"] == f"{n}\n"
    svc.process.send_signal(signal.SIGKILL)
    svc.process.wait(timeout=30)

    missing = {sha(code) for code in codes} - logged_code_hashes(db, "run")
    assert not missing, f"{len(missing)} of the 4 answered runs are not in the audit log"
