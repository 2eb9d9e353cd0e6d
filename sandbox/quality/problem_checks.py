"""Judging a problem's reference, controls and probes with the platform's judge.

Every run is a :class:`~sandbox.judge.JudgeRequest` with the problem's hidden
tests and another program, judged in a leased sandbox exactly as a trainer's
submissions are. The reference runs ``runs`` times; for ``assert`` tests each
run's trusted prelude seeds :mod:`random` with its own seed first, for
``files`` tests a ``conftest.py`` does (``io`` and ``function`` tests are
data: the runs repeat them as they are). Controls and probes stop at their
first failing test; ``sleep-timeout`` runs with the per-test time limit lowered
to the problem probe timeout. A run that hit a platform error is judged once more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from sandbox.errors import SandboxError
from sandbox.judge.judge import (
    DEFAULT_TEST_TIMEOUT_S,
    AssertTests,
    FileTests,
    Judge,
    JudgeRequest,
    JudgeResult,
)

from .model import CheckSettings, TrialSummary
from .probes import problem_submission
from .problems import Problem
from .progress import QualityProgress

__all__ = ["ProblemRuns", "run_problem_checks"]

TENANT: Final = "quality"
SEED_PRELUDE: Final = "import random as _quality_random\n\n_quality_random.seed({seed})\n"


@dataclass
class ProblemRuns:
    references: list[TrialSummary] = field(default_factory=list)
    controls: dict[str, TrialSummary] = field(default_factory=dict)
    probes: dict[str, TrialSummary] = field(default_factory=dict)
    plan_error: str | None = None
    """Why the judge refuses the problem before running anything."""


def seeded(request: JudgeRequest, seed: int) -> JudgeRequest:
    """The request with the judge side's :mod:`random` seeded (assert and files tests)."""
    tests = request.tests
    prefix = SEED_PRELUDE.format(seed=seed)
    if isinstance(tests, AssertTests):
        tests = tests.model_copy(update={"prelude": prefix + (tests.prelude or "")})
    elif isinstance(tests, FileTests):
        files = dict(tests.files)
        files["conftest.py"] = prefix + files.get("conftest.py", "")
        tests = tests.model_copy(update={"files": files})
    else:
        return request
    return request.model_copy(update={"tests": tests})


def _summary(
    label: str, result: JudgeResult, seconds: float, note: str | None = None
) -> TrialSummary:
    if result.error_class == "infra" or result.reward is None:
        return TrialSummary(
            label, None, "infra_error", result.message or "the platform failed", seconds
        )
    passed = result.all_passed
    failing = [t for t in result.tests if t.verdict.value not in ("passed", "skipped")]
    reason = None
    if not passed:
        first = failing[0] if failing else None
        if first is None:
            reason = str(result.error_class or "no test passed")
        else:
            reason = f"{result.error_class}: {first.name}"
            if first.message:
                reason += f" ({first.message[:160]})"
    return TrialSummary(
        label=label,
        passed=passed,
        outcome="passed" if passed else str(result.error_class or "failed"),
        reason=reason,
        seconds=seconds,
        tests={t.name: t.verdict.value for t in result.tests},
        counts={"tests": result.total, "passed": result.passed},
        note=note,
    )


@dataclass
class _Job:
    key: str
    role: str
    """reference, control or probe"""
    label: str
    request: JudgeRequest
    note: str | None = None


async def run_problem_checks(
    problems: Sequence[Problem],
    *,
    judge: Judge,
    settings: CheckSettings,
    probes: Mapping[str, Sequence[str]],
    progress: QualityProgress,
) -> dict[str, ProblemRuns]:
    """The reference, controls and probes (named by key) of every problem; results by key."""
    runs = {p.key: ProblemRuns() for p in problems}
    jobs: list[_Job] = []
    for problem in problems:
        run = runs[problem.key]
        try:
            judge.plan(problem.request)
        except SandboxError as exc:
            run.plan_error = str(exc)
            continue
        for index in range(settings.runs):
            seed = settings.seed + index
            jobs.append(
                _Job(
                    problem.key,
                    "reference",
                    f"reference-{index + 1}",
                    seeded(problem.request, seed),
                    f"seed {seed}",
                )
            )
        probe_jobs = [("control", name) for name in ("untouched", "empty", "trivial")]
        probe_jobs += [("probe", name) for name in probes[problem.key]]
        for role, name in probe_jobs:
            code = problem_submission(name, problem)
            if code is None:
                continue
            update: dict[str, object] = {"early_stop": True, "reward": "binary"}
            if name == "sleep-timeout":
                own = problem.request.test_timeout_s or DEFAULT_TEST_TIMEOUT_S
                update["test_timeout_s"] = min(own, settings.problem_probe_timeout_s)
            jobs.append(_Job(problem.key, role, name, problem.with_code(code, **update)))
        for index, code in enumerate(problem.wrong, start=1):
            jobs.append(
                _Job(
                    problem.key,
                    "control",
                    f"wrong-{index}",
                    problem.with_code(code, early_stop=True, reward="binary"),
                )
            )
    progress.begin("problems", len(jobs))
    gate = asyncio.Semaphore(settings.concurrency)

    async def one(job: _Job) -> None:
        async with gate:
            summary = None
            for _attempt in range(2):
                loop = asyncio.get_running_loop()
                started = loop.time()
                try:
                    result = await judge.judge(job.request, tenant=TENANT)
                except SandboxError as exc:
                    summary = TrialSummary(job.label, None, "infra_error", str(exc), 0.0)
                    continue
                summary = _summary(job.label, result, loop.time() - started, job.note)
                if summary.passed is not None:
                    break
        assert summary is not None
        run = runs[job.key]
        if job.role == "reference":
            run.references.append(summary)
        elif job.role == "control":
            run.controls[job.label] = summary
        else:
            run.probes[job.label] = summary
        progress.tick(loophole=job.role == "probe" and bool(summary.passed))

    await asyncio.gather(*(one(job) for job in jobs))
    for run in runs.values():
        run.references.sort(key=lambda s: int(s.label.rsplit("-", 1)[1]))
    return runs
