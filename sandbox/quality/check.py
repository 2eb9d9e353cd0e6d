"""One quality check: load the items, run every check on a platform, collect the report."""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.evals.agents import Agent
from sandbox.evals.runner import run_eval
from sandbox.service.platform import Platform

from . import difficulty, duplicates, findings
from .model import CheckSettings, ItemResult, Severity
from .probes import select_probes
from .problem_checks import run_problem_checks
from .progress import EvalProgress, QualityProgress
from .targets import Targets, load_targets
from .task_checks import run_task_checks

__all__ = ["QualityReport", "probe_plan", "run_check"]


@dataclass
class QualityReport:
    """Every item's results, the near-duplicates and the difficulty distribution."""

    items: list[ItemResult]
    settings: CheckSettings
    paths: list[str]
    started_at: str
    seconds: float = 0.0
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    distribution: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def failing(self) -> list[ItemResult]:
        """The items that are broken or have a loophole (the check's exit status is 1)."""
        return [item for item in self.items if item.failing]

    def counts(self) -> dict[str, int]:
        out = {"items": len(self.items), "ok": 0, "warning": 0, "loophole": 0, "broken": 0}
        for item in self.items:
            out[item.status] += 1
        return out

    def as_dict(self) -> dict[str, Any]:
        settings = {
            key: (str(value) if isinstance(value, Path) else value)
            for key, value in vars(self.settings).items()
        }
        settings["history"] = [str(p) for p in self.settings.history]
        return {
            "paths": self.paths,
            "started_at": self.started_at,
            "seconds": round(self.seconds, 2),
            "settings": settings,
            "counts": self.counts(),
            "failing": [item.key for item in self.failing],
            "duplicates": self.duplicates,
            "difficulty": self.distribution,
            "items": [item.as_dict() for item in self.items],
        }


def probe_plan(keys: Sequence[str], settings: CheckSettings) -> dict[str, list[str]]:
    """The probes each item runs: all selected, or ``probe_sample`` of them in rotation.

    Rotation starts at the seed, so successive seeds cover the library across a set.
    """
    names = [p.name for p in select_probes(settings.probes)]
    sample = settings.probe_sample
    if sample is None or sample >= len(names):
        return {key: list(names) for key in keys}
    plan = {}
    for index, key in enumerate(keys):
        start = (settings.seed + index * sample) % len(names)
        plan[key] = [names[(start + j) % len(names)] for j in range(sample)]
    return plan


def _fingerprints(targets: Targets) -> list[duplicates.Fingerprint]:
    prints = [
        duplicates.fingerprint(
            t.key,
            "task",
            t.task.config.instruction,
            [d.decode("utf-8", "replace") for p, d in t.task.tests.items() if p != "conftest.py"],
        )
        for t in targets.tasks
    ]
    prints += [
        duplicates.fingerprint(
            p.key,
            f"problem in {p.language}",
            p.text or p.reference,
            [p.request.tests.model_dump_json()],
        )
        for p in targets.problems
    ]
    return prints


async def _agent_scores(
    targets: Targets,
    agent: Agent,
    platform: Platform,
    settings: CheckSettings,
    work: Path,
    progress: QualityProgress,
) -> dict[str, list[float]]:
    tasks = [t.task for t in targets.tasks]
    summary = await run_eval(
        tasks,
        agent,
        sessions=platform.sessions,
        policies=platform.policies,
        out=work / "agent",
        epochs=settings.agent_k,
        concurrency=settings.concurrency,
        tenant="quality",
        progress=EvalProgress(
            progress, f"agent {agent.name}", len(tasks) * settings.agent_k, frozenset()
        ),
        available_images=platform.images,
    )
    return difficulty.read_history([summary.out])


async def run_check(
    paths: Sequence[Path],
    settings: CheckSettings,
    *,
    platform: Platform,
    progress: QualityProgress,
    agent: Agent | None = None,
) -> QualityReport:
    """Check every task and problem below ``paths`` on a started ``platform``."""
    settings.validate()
    select_probes(settings.probes)
    started = time.monotonic()
    targets = load_targets(list(paths))
    report = QualityReport(
        items=list(targets.broken),
        settings=settings,
        paths=[str(p) for p in paths],
        started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
    keys = [t.key for t in targets.tasks] + [p.key for p in targets.problems]
    probes = probe_plan(keys, settings)
    with tempfile.TemporaryDirectory(prefix="sandbox-quality-") as scratch:
        work = settings.keep or Path(scratch)
        task_runs = await run_task_checks(
            [(t.key, t.task) for t in targets.tasks],
            sessions=platform.sessions,
            policies=platform.policies,
            images=platform.images,
            settings=settings,
            probes=probes,
            progress=progress,
            work=work,
        )
        problem_runs = await run_problem_checks(
            targets.problems,
            judge=platform.judge,
            settings=settings,
            probes=probes,
            progress=progress,
        )
        scores = difficulty.read_history(settings.history)
        source = "past runs"
        if agent is not None and settings.agent_k and targets.tasks:
            scores.update(await _agent_scores(targets, agent, platform, settings, work, progress))
            source = f"agent {agent.name}, k={settings.agent_k}"
    progress.finish()
    for target in targets.tasks:
        task = target.task
        item = ItemResult(
            key=target.key,
            kind="task",
            source=str(task.path),
            category=task.config.category,
            language=task.config.image,
            declared_difficulty=task.config.difficulty,
        )
        findings.static_task_findings(
            item, task, images=platform.images, policies=platform.policies
        )
        findings.task_findings(item, task, task_runs[target.key])
        report.items.append(item)
    for problem in targets.problems:
        item = ItemResult(
            key=problem.key,
            kind="problem",
            source=problem.source,
            category=problem.category,
            language=problem.language,
            declared_difficulty=problem.difficulty,
        )
        findings.problem_findings(item, problem, problem_runs[problem.key])
        report.items.append(item)
    by_key = {item.key: item for item in report.items}
    for key, other, why, similarity in duplicates.find_duplicates(
        _fingerprints(targets), settings.duplicate_threshold
    ):
        report.duplicates.append({"items": [key, other], "why": why})
        for mine, theirs in ((key, other), (other, key)):
            by_key[mine].add(
                "duplicate",
                Severity.WARNING,
                f"near-duplicate of {theirs}: {why}",
                other=theirs,
                similarity=round(similarity, 3),
            )
    difficulty.apply_difficulty(
        report.items,
        scores,
        too_easy=settings.too_easy,
        too_hard=settings.too_hard,
        source=source,
    )
    report.distribution = difficulty.distribution(report.items)
    report.seconds = time.monotonic() - started
    return report
