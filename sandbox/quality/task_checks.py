"""Running a task's reference, controls and probes as evaluator trials.

Each run is a *variant* of the task (its own id, ``<key>.q-<label>``) judged by
:func:`~sandbox.evals.runner.run_eval` like any trial: a fresh session from the
task, an agent, then the hidden tests copied in after it stopped. The agent is
:class:`PlanAgent`, which carries out a plan per variant. Two phases:

1. the reference solution ``runs`` times, each with its own seed (the hidden
   tests get a ``conftest.py`` that seeds :mod:`random` with it; a ``command``
   also sees ``PYTHONHASHSEED``, ``SANDBOX_QUALITY_SEED`` and ``RANDOM``),
   recording which files it created or changed in the session's working directory
   (the *answer files*: below ``/workspace``, or a built environment's own ``WORKDIR``
   such as ``/app``, where the plans then write); and the untouched initial state,
   during which the agent looks for the hidden tests' lines outside the
   workspace (the ``read-expected`` probe);
2. the empty and trivial answers and every probe, built on the answer files.

Variants of phase 2 (and the untouched state) run with the hidden tests' time
limit lowered to the probe timeout: a probe only has to be told apart from a
full pass. A variant that hit a platform error is run once more.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

from sandbox.backends.base import WORKDIR
from sandbox.core.argv import shell_command
from sandbox.core.sessions import SessionManager
from sandbox.evals.agents import Agent, OracleAgent, Tools, TrialContext
from sandbox.evals.runner import RunSummary, run_eval
from sandbox.evals.tasks import AgentBudget, Task
from sandbox.policy import Policy

from .model import CheckSettings, TrialSummary
from .probes import (
    Action,
    AnswerFile,
    leak_scan_command,
    parse_leaks,
    secret_lines,
    task_plan,
)
from .progress import EvalProgress, QualityProgress

__all__ = ["PlanAgent", "TaskRuns", "run_task_checks"]

logger = logging.getLogger(__name__)

MARK: Final = "/tmp/.quality-mark"
TICK: Final = "/tmp/.quality-tick"
# File times come from the kernel's coarse clock (one tick is 1 to 10 ms): a file the
# reference writes within the tick of the mark would not be newer than it. Wait, after
# the mark, until a file touched now is newer (a bounded loop of touches).
MARK_AND_TICK: Final = (
    f"touch {MARK}; i=0; while [ $i -lt 1000 ]; do touch {TICK}; "
    f'[ -n "$(find {TICK} -newer {MARK})" ] && break; i=$((i+1)); done; rm -f {TICK}'
)
BEGIN: Final = "@@quality-files@@"
END: Final = "@@quality-end@@"
MAX_ANSWER_FILES: Final = 200
STAGE: Final = ".quality-stage"
"""Where a plan's files are staged below /workspace when the working directory is elsewhere."""
EXTRA_STEPS: Final = 12
FAILED_RE: Final = re.compile(r"^(FAILED|ERROR) (\S+)", re.MULTILINE)
SEED_CONFTEST: Final = (
    "# Added by `sandbox quality check`: this run's seed.\n"
    "import random as _quality_random\n\n_quality_random.seed({seed})\n"
)


@dataclass
class Plan:
    """What the agent does in one variant."""

    actions: list[Action] = field(default_factory=list)
    reference: bool = False
    """Apply the reference solution as the evaluator's oracle does (and record the answer files)."""
    secrets: list[str] = field(default_factory=list)
    """Look for these lines outside the workspace (before anything else)."""


@dataclass
class Observed:
    """What a plan saw while it ran."""

    answers: list[AnswerFile] = field(default_factory=list)
    leaks: list[str] | None = None


class PlanAgent(Agent):
    """Carries out each variant's plan; remembers what it observed, by variant id."""

    name = "quality"

    def __init__(self, plans: Mapping[str, Plan]) -> None:
        self.plans = dict(plans)
        self.observed: dict[str, Observed] = {}
        self.oracle = OracleAgent()
        self.oracle_files: dict[str, dict[str, bytes]] = {}

    def prepare(self, tasks: Sequence[Task]) -> None:
        references = [task for task in tasks if self.plans[task.id].reference]
        self.oracle.prepare(references)
        self.oracle_files = {task.id: task.solution_files for task in references}

    async def run(self, trial: TrialContext, tools: Tools) -> None:
        plan = self.plans[trial.task_id]
        seen = self.observed.setdefault(trial.task_id, Observed())
        if plan.secrets:
            seen.leaks = parse_leaks(await tools.shell(leak_scan_command(plan.secrets)))
        workdir = tools.workdir
        if plan.reference:
            await self._reference(trial, tools, seen, workdir)
        for action in plan.actions:
            await _apply(action, tools, workdir)
        tools.done("quality plan applied")

    async def _reference(
        self, trial: TrialContext, tools: Tools, seen: Observed, workdir: str
    ) -> None:
        await tools.shell(MARK_AND_TICK)
        await self.oracle.run(trial, cast(Tools, _KeepOpen(tools)))
        files = self.oracle_files[trial.task_id]
        listing = await tools.shell(
            f"echo {BEGIN}; cd {shlex.quote(workdir)} && find . -xdev -type f \\( -newer {MARK} -o "
            f"-cnewer {MARK} \\) -not -path '*/__pycache__/*' -not -path '*/.pytest_cache/*' "
            f"-printf '%m %P\\n' | sort | head -n {MAX_ANSWER_FILES}; echo {END}; rm -f {MARK}"
        )
        seen.answers = _parse_listing(listing, files)


async def _apply(action: Action, tools: Tools, workdir: str) -> None:
    """One action of a plan, its paths relative to the session's working directory."""
    if action.kind == "write" and workdir == WORKDIR:
        await tools.write_files(dict(action.files))
        return
    if action.kind == "write":  # files are written below /workspace only: staged there
        await tools.write_files({f"{STAGE}/{path}": data for path, data in action.files.items()})
        command = f"cp -R --preserve=mode {WORKDIR}/{STAGE}/. . && rm -rf {WORKDIR}/{STAGE}"
    elif action.kind == "chmod":
        command = shell_command("chmod", "+x", paths=action.paths)
    elif action.kind == "delete":
        command = shell_command("rm", "-rf", paths=action.paths)
    else:
        command = action.command
    await tools.shell(f"cd {shlex.quote(workdir)} && {command}")


class _KeepOpen:
    """The agent's tools, except that ``done`` does not end the agent (the oracle calls it)."""

    def __init__(self, tools: Tools) -> None:
        self._tools = tools

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tools, name)

    def done(self, message: str = "") -> str:
        return "done"


def _parse_listing(observation: str, known: Mapping[str, bytes]) -> list[AnswerFile]:
    inside = observation.split(BEGIN, 1)[-1].split(END, 1)[0]
    answers = []
    for line in inside.splitlines():
        match = re.fullmatch(r"([0-7]{3,4}) (.+)", line.strip())
        if match:
            path = match.group(2)
            answers.append(AnswerFile(path, bool(int(match.group(1), 8) & 0o111), known.get(path)))
    return answers


# ---------------------------------------------------------------------------- variants


def variant(
    task: Task,
    key: str,
    label: str,
    *,
    seed: int | None = None,
    timeout_s: float | None = None,
) -> Task:
    """The task as one run of the check sees it (its own id, limits and seed)."""
    spec = task.config.tests
    command = spec.command
    tests = dict(task.tests)
    if seed is not None:
        if command is not None:
            command = (
                f"export PYTHONHASHSEED={seed} SANDBOX_QUALITY_SEED={seed}; RANDOM={seed}; "
                f"{command}"
            )
        tests["conftest.py"] = SEED_CONFTEST.format(seed=seed).encode() + tests.get(
            "conftest.py", b""
        )
    limit = spec.timeout_s if timeout_s is None else min(spec.timeout_s, timeout_s)
    budget = AgentBudget(
        timeout_s=max(task.config.agent.timeout_s, 600.0),
        max_steps=task.config.agent.max_steps + EXTRA_STEPS,
    )
    config = task.config.model_copy(
        update={
            "tests": spec.model_copy(update={"command": command, "timeout_s": limit}),
            "agent": budget,
        }
    )
    safe = key.replace("/", "__")
    return dataclasses.replace(task, id=f"{safe}.q-{label}", config=config, tests=tests)


def summarize_record(label: str, record: Mapping[str, Any]) -> TrialSummary:
    """One trial's record as a TrialSummary (its hidden tests decide, not the agent's outcome)."""
    outcome = str(record.get("outcome"))
    tests = record.get("tests") or {}
    passed: bool | None = None if outcome == "infra_error" else bool(record.get("tests_passed"))
    failing = {
        name: verdict.lower() for verdict, name in FAILED_RE.findall(tests.get("stdout_tail", ""))
    }
    reason = tests.get("reason") or record.get("error")
    if outcome == "test_timeout" or tests.get("status") == "timeout":
        reason = "the hidden tests did not finish in time"
    return TrialSummary(
        label=label,
        passed=passed,
        outcome="passed" if passed else ("infra_error" if passed is None else outcome),
        reason=None if passed else reason,
        seconds=float(record.get("total_s") or 0.0),
        tests=failing,
        counts=tests.get("report"),
        trajectory=record.get("trajectory"),
    )


# ---------------------------------------------------------------------------- the runs


@dataclass
class TaskRuns:
    """What phase 1 and 2 produced for one task."""

    references: list[TrialSummary] = field(default_factory=list)
    controls: dict[str, TrialSummary] = field(default_factory=dict)
    probes: dict[str, TrialSummary] = field(default_factory=dict)
    answers: list[AnswerFile] = field(default_factory=list)
    leaks: list[str] | None = None
    setup_failed: str | None = None


@dataclass
class _Env:
    sessions: SessionManager
    policies: Mapping[str, Policy]
    images: Iterable[str]
    settings: CheckSettings
    progress: QualityProgress
    work: Path


async def _run_phase(
    env: _Env,
    name: str,
    variants: Sequence[Task],
    plans: Mapping[str, Plan],
    probes: frozenset[str] = frozenset(),
) -> tuple[PlanAgent, dict[str, dict[str, Any]]]:
    """Every variant once (platform errors once more); the latest record of each."""
    agent = PlanAgent(plans)
    if not variants:
        return agent, {}
    out = env.work / name
    records: dict[str, dict[str, Any]] = {}
    todo = list(variants)
    for attempt in range(2):
        summary: RunSummary = await run_eval(
            todo,
            agent,
            sessions=env.sessions,
            policies=env.policies,
            out=out,
            concurrency=env.settings.concurrency,
            tenant="quality",
            progress=EvalProgress(
                env.progress, name if not attempt else f"{name} (retry)", len(todo), probes
            ),
            available_images=env.images,
        )
        for record in summary.records:
            records[record["task"]] = record
        todo = [v for v in todo if records.get(v.id, {}).get("outcome") == "infra_error"]
        todo = [v for v in todo if not _setup_failed(records[v.id])]
        if not todo:
            break
    for record in records.values():
        if record.get("trajectory"):
            record["trajectory"] = str(out / record["trajectory"])
    return agent, records


def _setup_failed(record: Mapping[str, Any]) -> bool:
    return str(record.get("error") or "").startswith("the task's setup failed")


async def run_task_checks(
    tasks: Sequence[tuple[str, Task]],
    *,
    sessions: SessionManager,
    policies: Mapping[str, Policy],
    images: Iterable[str],
    settings: CheckSettings,
    probes: Mapping[str, Sequence[str]],
    progress: QualityProgress,
    work: Path,
) -> dict[str, TaskRuns]:
    """Phase 1 and phase 2 for every ``(key, task)`` with the probes named for its key."""
    env = _Env(sessions, policies, list(images), settings, progress, work)
    runs = {key: TaskRuns() for key, _ in tasks}

    # ---------------------------------------------------------------- phase 1
    variants: list[Task] = []
    plans: dict[str, Plan] = {}
    owners: dict[str, tuple[str, str]] = {}
    for key, task in tasks:
        for index in range(settings.runs):
            seed = settings.seed + index
            v = variant(task, key, f"reference-{index + 1}", seed=seed)
            variants.append(v)
            plans[v.id] = Plan(reference=True)
            owners[v.id] = (key, f"reference-{index + 1}")
        v = variant(task, key, "untouched", timeout_s=settings.probe_timeout_s)
        variants.append(v)
        secrets = secret_lines(task.tests, task.files) if "read-expected" in probes[key] else []
        plans[v.id] = Plan(secrets=secrets)
        owners[v.id] = (key, "untouched")
    agent, records = await _run_phase(env, "references and untouched states", variants, plans)
    for variant_id, (key, label) in owners.items():
        record = records.get(variant_id)
        if record is None:
            continue
        summary = summarize_record(label, record)
        if _setup_failed(record):
            runs[key].setup_failed = str(record.get("error"))
        seen = agent.observed.get(variant_id, Observed())
        if label == "untouched":
            runs[key].controls["untouched"] = summary
            runs[key].leaks = seen.leaks
        else:
            runs[key].references.append(summary)
            known = {a.path for a in runs[key].answers}
            runs[key].answers.extend(a for a in seen.answers if a.path not in known)
            summary.note = f"seed {settings.seed + int(label.rsplit('-', 1)[1]) - 1}"

    # ---------------------------------------------------------------- phase 2
    variants, plans, owners = [], {}, {}
    for key, task in tasks:
        run = runs[key]
        if run.setup_failed:
            continue
        reference_passes = any(r.passed for r in run.references)
        labels = ["empty", "trivial"]
        if reference_passes:
            labels += list(probes[key])
        for label in labels:
            plan = task_plan(label, run.answers, task.files, task.tests)
            if plan is None:
                continue
            v = variant(task, key, label, timeout_s=settings.probe_timeout_s)
            variants.append(v)
            plans[v.id] = Plan(actions=plan)
            owners[v.id] = (key, label)
    probe_ids = frozenset(
        v for v, (_, label) in owners.items() if label not in ("empty", "trivial")
    )
    _, records = await _run_phase(env, "controls and probes", variants, plans, probe_ids)
    for variant_id, (key, label) in owners.items():
        record = records.get(variant_id)
        if record is None:
            continue
        summary = summarize_record(label, record)
        if label in ("empty", "trivial"):
            runs[key].controls[label] = summary
        else:
            runs[key].probes[label] = summary
    return runs
