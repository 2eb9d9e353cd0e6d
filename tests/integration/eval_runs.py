"""Running evaluator tasks on a test's in-process platform, as ``sandbox eval run`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandbox.evals import run_eval
from sandbox.evals.agents import Agent
from sandbox.evals.runner import RunSummary
from sandbox.evals.tasks import Task
from sandbox.service.platform import Platform


async def run_tasks(
    platform: Platform, tasks: list[Task], agent: Agent, out: Path, *, concurrency: int = 2
) -> RunSummary:
    """Every task once with ``agent``, its run written below ``out``."""
    return await run_eval(
        tasks,
        agent,
        sessions=platform.sessions,
        policies=platform.policies,
        out=out,
        concurrency=concurrency,
        progress=False,
        available_images=platform.images,
    )


def by_task(summary: RunSummary) -> dict[str, dict[str, Any]]:
    """The run's trial records, by task id."""
    return {r["task"]: r for r in summary.records}
