"""The shipped evaluator tasks (``sandbox/evals/suite``): every task loads with the
evaluator's strict loader, and the suite covers the categories, difficulties and images
the issue asks for.

That the reference solution passes every task and the untouched state fails every one,
each trial judged for real in its own session, is asserted by the quality gate
(``tests/integration/test_quality.py::test_shipped_tasks_are_clean``), whose first phase
runs exactly those trials.
"""

from __future__ import annotations

from collections import Counter

import pytest

from sandbox.evals import Task, load_tasks
from tests.conftest import REPO

pytestmark = pytest.mark.docker

SUITE = REPO / "sandbox" / "evals" / "suite"
CATEGORIES = {"bugfix", "cli", "c-build", "data", "config", "environment", "multi-file"}


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_tasks(SUITE)


def test_the_suite_covers_the_categories_difficulties_and_images(tasks: list[Task]) -> None:
    assert len(tasks) >= 20
    categories = Counter(t.config.category for t in tasks)
    assert set(categories) == CATEGORIES and min(categories.values()) >= 3, categories
    assert {t.config.difficulty for t in tasks} == {"easy", "medium", "hard"}
    assert {t.config.image for t in tasks} == {"python", "polyglot"}
