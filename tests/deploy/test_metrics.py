"""The metrics the alert rules need, each made to move by the real thing.

A sandbox the engine cannot create counts in ``sandbox_pool_start_failures_total``;
an audit log edited behind the service's back turns ``sandbox_audit_chain_ok`` to 0
at the next walk.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from sandbox.errors import InfrastructureError
from sandbox.service.platform import STATE_DIR_ENV, Platform
from tests.conftest import Service, make_policy, metric

pytestmark = pytest.mark.docker

MISSING_IMAGE = "sandbox-python:no-such-build"


async def test_a_sandbox_that_cannot_start_is_counted(platform: Platform) -> None:
    """The engine has no such image: the lease fails and the group's counter says so."""
    policy = make_policy("start-fails")
    before = metric(
        (await platform.metrics()).decode(),
        "sandbox_pool_start_failures_total",
        policy="start-fails",
    )
    with pytest.raises(InfrastructureError, match="could not start a sandbox"):
        async with platform.pool.lease(MISSING_IMAGE, policy, "tenant-a"):
            pass
    text = (await platform.metrics()).decode()
    failed = metric(
        text, "sandbox_pool_start_failures_total", policy="start-fails", image=MISSING_IMAGE
    )
    assert (before, failed) == (0, 1)


def scrape(http: httpx.Client, name: str) -> float | None:
    """The value of an unlabelled metric, or None while it is absent."""
    text = http.get("/metrics").text
    if f"\n{name} " not in text:
        return None
    return metric(text, name)


def wait_for(http: httpx.Client, name: str, wanted: float, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while (value := scrape(http, name)) != wanted:
        assert time.monotonic() < deadline, f"{name} is {value}, not {wanted}, after {timeout} s"
        time.sleep(0.2)


def test_an_audit_log_edited_outside_the_service_reads_broken(tmp_path: Path) -> None:
    state = tmp_path / "state"
    svc = Service(
        "--audit-verify-interval", "0.3", log_dir=tmp_path, env={STATE_DIR_ENV: str(state)}
    )
    try:
        svc.wait_ready()
        with httpx.Client(base_url=svc.url, timeout=60) as http:
            for n in range(2):
                assert http.post("/v1/run", json={"code": f"print({n})"}).status_code == 200
            wait_for(http, "sandbox_audit_chain_records", 2)
            assert scrape(http, "sandbox_audit_chain_ok") == 1
            walked = scrape(http, "sandbox_audit_chain_verified_timestamp_seconds")
            assert walked is not None and abs(walked - time.time()) < 30

            # Going around the append-only triggers, as someone with the file could.
            with sqlite3.connect(state / "audit.db") as db:
                db.execute("DROP TRIGGER audit_no_update")
                db.execute("UPDATE audit SET verdict = 'tampered' WHERE id = 1")
            wait_for(http, "sandbox_audit_chain_ok", 0)
            later = scrape(http, "sandbox_audit_chain_verified_timestamp_seconds")
            assert later is not None and later > walked
    finally:
        svc.stop()
    assert "is BROKEN at record 1" in svc.log()
