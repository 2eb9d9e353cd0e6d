"""The shipped Harbor-format tasks (``sandbox/evals/harbor_suite``) through our own evaluator.

What ``sandbox eval run`` does, on an in-process platform with the real engine:
each task's ``environment/Dockerfile`` is built by the environment builder
(found cached after its first build), the agent works in a session of it, and
the task's own ``tests/test.sh`` judges the trial as the judge uid, re-running
the agent's programs as the sandbox uid through ``agent-run``. The reference
solution passes every task; doing nothing, and the wrong or partial fix shipped for
each task in ``fixtures/harbor_partial/``, fail every one. Then the quality
check runs every probe on two of them and finds no loophole.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from sandbox.evals import NullAgent, OracleAgent
from sandbox.evals.formats import load_tasks
from sandbox.quality import CheckSettings, run_check
from sandbox.quality.progress import QualityProgress
from sandbox.service.platform import Platform
from tests.conftest import REPO
from tests.integration.eval_runs import by_task, run_tasks

pytestmark = pytest.mark.docker

SUITE = REPO / "sandbox" / "evals" / "harbor_suite"
PARTIAL = REPO / "tests" / "integration" / "fixtures" / "harbor_partial"


def with_partial_solutions(root: Path) -> Path:
    """The suite copied below ``root``, each task's ``solution/solve.sh`` replaced by its
    wrong or partial fix from ``fixtures/harbor_partial``. A fix that derives from the
    reference (``/solution/reference.sh`` in Harbor's flow) finds it in ``/tmp``: our
    tasks hold no solution file but ``solve.sh``, so the script writes it there first."""
    for task in sorted(p.parent for p in SUITE.glob("*/task.toml")):
        copy = root / task.name
        shutil.copytree(task, copy)
        solve = copy / "solution" / "solve.sh"
        reference = solve.read_text()
        partial = (PARTIAL / f"{task.name}.sh").read_text()
        if "/solution/reference.sh" in partial:
            partial = (
                f"cat > /tmp/reference.sh <<'__REFERENCE__'\n{reference}\n__REFERENCE__\n"
                + partial.replace("/solution/reference.sh", "/tmp/reference.sh")
            )
        solve.write_text(partial)
    return root


async def test_oracle_passes_and_null_and_partial_fixes_fail_every_harbor_suite_task(
    platform: Platform, tmp_path: Path
) -> None:
    tasks = load_tasks(SUITE)
    assert len(tasks) == 12 and {t.format for t in tasks} == {"harbor"}
    assert all(t.environment is not None and t.environment.dockerfile for t in tasks)
    started = time.monotonic()
    summary = await run_tasks(platform, tasks, OracleAgent(), tmp_path / "oracle", concurrency=4)
    oracle = by_task(summary)
    print(f"12 Harbor tasks, oracle: {time.monotonic() - started:.1f} s")
    partial_tasks = load_tasks(with_partial_solutions(tmp_path / "partial-tasks"))
    null_run, partial_run = await asyncio.gather(
        run_tasks(platform, tasks, NullAgent(), tmp_path / "null", concurrency=2),
        run_tasks(platform, partial_tasks, OracleAgent(), tmp_path / "partial", concurrency=2),
    )
    null, partial = by_task(null_run), by_task(partial_run)
    for task in tasks:
        passed = oracle[task.id]
        assert passed["outcome"] == "passed", (task.id, passed["error"], passed["tests"])
        assert passed["tests"]["reward"] == 1.0
        assert "PASS" in passed["tests"]["stdout_tail"]
        for failed in (null[task.id], partial[task.id]):
            assert failed["outcome"] == "failed", (task.id, failed["error"], failed["tests"])
            assert failed["tests"]["reward"] == 0.0
            # Its own built environment, found cached by the later runs.
            assert failed["environment"]["id"] == passed["environment"]["id"]
            assert failed["environment"]["cached"] is True
        assert passed["environment"]["image"].startswith("sandbox-env:")


async def test_quality_check_finds_no_loophole_in_harbor_suite_tasks(
    platform: Platform, tmp_path: Path
) -> None:
    chosen = [SUITE / "csv-encoding", SUITE / "build-parallel-race"]
    report = await asyncio.wait_for(
        run_check(
            chosen,
            CheckSettings(concurrency=4, runs=1),
            platform=platform,
            progress=QualityProgress(enabled=False),
        ),
        timeout=1500,
    )
    items = {item.key: item for item in report.items}
    assert set(items) == {"csv-encoding", "build-parallel-race"}
    for key, item in items.items():
        assert item.loaded, (key, item.findings)
        assert item.status not in ("broken", "loophole"), (key, item.findings)
        loopholes = [f for f in item.findings if f.severity == "loophole"]
        assert not loopholes, (key, loopholes)
