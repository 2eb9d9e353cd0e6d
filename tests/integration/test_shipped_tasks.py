"""The shipped evaluator tasks (``sandbox/evals/suite``), judged for real by the evaluator.

Every task loads with the evaluator's strict loader; the reference-solution
agent passes every one and the do-nothing agent fails every one, each trial in
its own sandbox session with the hidden tests copied in after the agent
stopped. The suite covers the categories, difficulties and images the issue
asks for.
"""

from __future__ import annotations

from collections import Counter

import pytest

from sandbox.evals import NullAgent, OracleAgent, Task, load_tasks, run_eval
from sandbox.evals.agents import Agent
from sandbox.evals.runner import RunSummary
from sandbox.service.platform import Platform
from tests.conftest import REPO

pytestmark = pytest.mark.docker

SUITE = REPO / "sandbox" / "evals" / "suite"
CATEGORIES = {"bugfix", "cli", "c-build", "data", "config", "environment", "multi-file"}


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_tasks(SUITE)


async def run(
    platform: Platform, tasks: list[Task], agent: Agent, tmp: pytest.TempPathFactory
) -> RunSummary:
    return await run_eval(
        tasks,
        agent,
        sessions=platform.sessions,
        policies=platform.policies,
        out=tmp.mktemp(type(agent).__name__),
        concurrency=4,
        progress=False,
        available_images=platform.images,
    )


def test_the_suite_covers_the_categories_difficulties_and_images(tasks: list[Task]) -> None:
    assert len(tasks) >= 20
    categories = Counter(t.config.category for t in tasks)
    assert set(categories) == CATEGORIES and min(categories.values()) >= 3, categories
    assert {t.config.difficulty for t in tasks} == {"easy", "medium", "hard"}
    assert {t.config.image for t in tasks} == {"python", "polyglot"}


async def test_every_reference_solution_passes(
    platform: Platform, tasks: list[Task], tmp_path_factory: pytest.TempPathFactory
) -> None:
    summary = await run(platform, tasks, OracleAgent(), tmp_path_factory)
    outcomes = {r["task"]: r["outcome"] for r in summary.records}
    assert outcomes == {t.id: "passed" for t in tasks}


async def test_the_untouched_initial_state_fails_every_task(
    platform: Platform, tasks: list[Task], tmp_path_factory: pytest.TempPathFactory
) -> None:
    summary = await run(platform, tasks, NullAgent(), tmp_path_factory)
    outcomes = {r["task"]: r["outcome"] for r in summary.records}
    assert outcomes == {t.id: "failed" for t in tasks}
