"""Running tasks x epochs: one sandbox session per trial, the agent under its budget, hidden tests.

A trial goes: a session from the task (image, policy, ``files/`` with their
executable bits, then ``setup``); the agent with its :class:`~.agents.Tools`
until it is done, out of steps or out of time; then
:meth:`~sandbox.core.sessions.SessionManager.run_hidden_tests` (the tests are copied
in only now, every process the agent left is killed first); the session is
closed. Its outcome is one of :data:`OUTCOMES`:

``passed``            the agent finished and the tests passed
``failed``            the agent finished and the tests did not pass
``agent_timeout``     the wall-clock budget ran out (tests still run, as information)
``budget_exhausted``  the agent wanted more steps than allowed (likewise)
``test_timeout``      the hidden tests did not finish in ``tests.timeout_s``
``infra_error``       the platform, the task's set-up or the agent's own machinery (its
                      model endpoint) failed: no verdict about the agent, left out of scores

Pytest-judged tests (``tests.framework: pytest``) pass when pytest exits 0 and
the report of the platform's own plugin, which only the runner reads and which
must carry the run's nonce (see ``runner/harness/pytest_channel.py``), lists at
least one passed test and no failure, error, collection error or test left
without an outcome: a report file the code under test writes means nothing, and
exiting early (``os._exit(0)`` at import) sends no report. A ``tests.command``
passes when it exits 0. A task read from Harbor or Terminal-Bench
(``Task.judged_by_reward``) passes when the reward file its tests wrote to the
fresh, judge-only verifier directory says at least 1 (:mod:`.reward_files`).

A run directory holds ``run.json`` (the agent, the tasks and their digests),
``results.jsonl`` (one line per finished trial, appended and fsynced as each
finishes) and ``trajectories/<task>/epoch-<k>.jsonl``. Running again into the
same directory resumes: trials with a result are skipped (an ``infra_error``
is retried), a half-written last line is ignored; a different agent, or a task
whose content changed under finished trials, is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from sandbox.core.sessions import SessionManager
from sandbox.errors import ContainerLostError, InvalidRequestError, NotFoundError, SandboxError
from sandbox.host.files import write_text_atomic
from sandbox.policy import Policy

from .agents import Agent, AgentError, Tools, Trajectory, TrialContext
from .judging import (
    OUTCOMES,
    Outcome,
    PytestReport,
    SetupFailed,
    judge_report,
    judge_session,
    start_task_session,
)
from .tasks import Task

__all__ = [
    "OUTCOMES",
    "Outcome",
    "Progress",
    "PytestReport",
    "RunDir",
    "RunSummary",
    "format_duration",
    "judge_report",
    "run_eval",
    "run_local",
]

logger = logging.getLogger(__name__)

FORMAT_VERSION: Final = 1
DEFAULT_TENANT: Final = "eval"
MAX_EPOCHS: Final = 1000
MAX_CONCURRENCY: Final = 256


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


# ------------------------------------------------------------------------------ run dir


@dataclass
class RunDir:
    """The files of one run; see the module docstring."""

    path: Path

    @property
    def meta_path(self) -> Path:
        return self.path / "run.json"

    @property
    def results_path(self) -> Path:
        return self.path / "results.jsonl"

    def trajectory_path(self, task_id: str, epoch: int) -> Path:
        return self.path / "trajectories" / task_id / f"epoch-{epoch}.jsonl"

    def read_meta(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.meta_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise InvalidRequestError(
                f"{self.meta_path}: unreadable ({exc}); fix or remove it"
            ) from None
        if not isinstance(data, dict):
            raise InvalidRequestError(f"{self.meta_path}: not a JSON object")
        return data

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        write_text_atomic(self.meta_path, json.dumps(meta, indent=2, sort_keys=True) + "\n")

    def read_results(self) -> list[dict[str, Any]]:
        """Every complete record, in file order; a torn last line is skipped."""
        return read_results(self.results_path)

    def latest(self) -> dict[tuple[str, int], dict[str, Any]]:
        """The last record of each trial."""
        return {(r["task"], int(r["epoch"])): r for r in self.read_results()}


def read_results(path: Path) -> list[dict[str, Any]]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    records = []
    lines = raw.split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            where = "the last line (half-written)" if number == len(lines) else f"line {number}"
            logger.warning("%s: skipping %s: not JSON", path, where)
            continue
        if isinstance(record, dict) and "task" in record and "epoch" in record:
            records.append(record)
    return records


class _ResultsFile:
    """Append-only results: one whole line per write, flushed and fsynced."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = path.open("ab")
        if self._file.tell() > 0:
            with path.open("rb") as existing:
                existing.seek(-1, os.SEEK_END)
                if existing.read(1) != b"\n":
                    self._file.write(b"\n")  # a torn line stays alone on its line

    def append(self, record: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(record, sort_keys=True).encode() + b"\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


# ------------------------------------------------------------------------------ progress


class Progress:
    """A progress bar on stderr: redrawn in place on a terminal, a line per trial otherwise."""

    WIDTH = 28

    def __init__(self, total: int, *, stream: IO[str] | None = None, enabled: bool = True) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.done = 0
        self.counts: dict[str, int] = {}
        self.started = time.monotonic()

    def _line(self) -> str:
        fraction = self.done / self.total if self.total else 1.0
        filled = int(self.WIDTH * fraction)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        elapsed = time.monotonic() - self.started
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        counts = (
            f"pass {self.counts.get('passed', 0)}  "
            f"fail {self.done - self.counts.get('passed', 0) - self.counts.get('infra_error', 0)}"
            f"  infra {self.counts.get('infra_error', 0)}"
        )
        return (
            f"eval [{bar}] {self.done}/{self.total}  {counts}  "
            f"{format_duration(elapsed)} elapsed, eta {format_duration(eta)}"
        )

    def start(self, already: int) -> None:
        if not self.enabled:
            return
        if already:
            self.stream.write(f"eval: resuming; {already} trial(s) already finished\n")
        if self.tty:
            self.stream.write(self._line())
        self.stream.flush()

    def update(self, record: Mapping[str, Any]) -> None:
        self.done += 1
        outcome = str(record.get("outcome"))
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\r\x1b[K" + self._line())
        else:
            self.stream.write(
                f"[{self.done}/{self.total}] {record['task']} epoch {record['epoch']}: "
                f"{outcome} ({record.get('total_s', 0):.1f} s)\n"
            )
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()


def format_duration(seconds: float) -> str:
    """``42s``, ``3m07s`` or ``1h05m``."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


# ------------------------------------------------------------------------------ trials


@dataclass
class RunSummary:
    """What one invocation did."""

    out: Path
    ran: int
    skipped: int
    records: list[dict[str, Any]] = field(default_factory=list)
    """The latest record of every trial of the run (finished before or now)."""


@dataclass
class _Trial:
    sessions: SessionManager
    agent: Agent
    tenant: str
    policy: Policy
    run: RunDir


async def _run_trial(env: _Trial, task: Task, epoch: int) -> dict[str, Any]:
    config = task.config
    trajectory_path = env.run.trajectory_path(task.id, epoch)
    record: dict[str, Any] = {
        "task": task.id,
        "epoch": epoch,
        "agent": env.agent.name,
        "task_digest": task.digest,
        "category": config.category,
        "difficulty": task.difficulty,
        "tags": list(config.tags),
        "outcome": None,
        "score": None,
        "error": None,
        "steps": 0,
        "tokens": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        "model_calls": 0,
        "cost": 0.0,
        "setup_s": 0.0,
        "agent_s": 0.0,
        "tests_s": 0.0,
        "total_s": 0.0,
        "tests": None,
        "tests_passed": None,
        "started_at": _now(),
        "finished_at": None,
        "trajectory": str(trajectory_path.relative_to(env.run.path)),
    }
    trajectory = Trajectory(trajectory_path)
    trajectory.write(
        {
            "type": "start",
            "task": task.id,
            "epoch": epoch,
            "agent": env.agent.name,
            "task_digest": task.digest,
            "instruction": config.instruction,
            "budget": {"max_steps": config.agent.max_steps, "timeout_s": config.agent.timeout_s},
            "at": record["started_at"],
        }
    )
    started = time.monotonic()
    try:
        outcome = await _trial_body(env, task, epoch, record, trajectory, started)
        record["outcome"] = outcome.value
    except asyncio.CancelledError:
        trajectory.write({"type": "end", "outcome": None, "error": "the run was interrupted"})
        trajectory.close()
        raise
    except Exception as exc:  # one broken trial must not end the whole run
        logger.exception("trial %s epoch %d failed", task.id, epoch)
        record["outcome"] = Outcome.INFRA_ERROR.value
        record["error"] = f"the evaluator failed: {type(exc).__name__}: {exc}"
    finally:
        session_id = record.pop("_session", None)
        if session_id is not None:
            with contextlib.suppress(SandboxError):
                await env.sessions.close(session_id, tenant=env.tenant)
    record["score"] = (
        None
        if record["outcome"] == Outcome.INFRA_ERROR
        else (1 if record["outcome"] == Outcome.PASSED else 0)
    )
    record["total_s"] = round(time.monotonic() - started, 4)
    record["finished_at"] = _now()
    trajectory.write(
        {
            "type": "end",
            "outcome": record["outcome"],
            "error": record["error"],
            "tests": record["tests"],
            "steps": record["steps"],
            "tokens": record["tokens"],
            "total_s": record["total_s"],
        }
    )
    trajectory.close()
    return record


async def _trial_body(
    env: _Trial,
    task: Task,
    epoch: int,
    record: dict[str, Any],
    trajectory: Trajectory,
    started: float,
) -> Outcome:
    config = task.config
    sessions, tenant = env.sessions, env.tenant
    # ---------------------------------------------------------------- the session
    try:
        session_id = await start_task_session(sessions, task, tenant=tenant, record=record)
    except SetupFailed as exc:
        record["error"] = str(exc)
        return Outcome.INFRA_ERROR
    except SandboxError as exc:
        record["error"] = f"could not start the task's session: {exc}"
        return Outcome.INFRA_ERROR
    record["setup_s"] = round(time.monotonic() - started, 4)
    trajectory.write({"type": "ready", "setup_s": record["setup_s"]})

    # ---------------------------------------------------------------- the agent
    tools = Tools(
        sessions,
        session_id,
        tenant=tenant,
        max_steps=config.agent.max_steps,
        timeout_s=config.agent.timeout_s,
        command_wall_s=env.policy.resources.wall_time_s,
        trajectory=trajectory,
    )
    context = TrialContext(task_id=task.id, epoch=epoch, instruction=config.instruction)
    agent_task = asyncio.create_task(env.agent.run(context, tools), name=f"agent {task.id}")
    try:
        finished, _ = await asyncio.wait({agent_task}, timeout=config.agent.timeout_s)
    except asyncio.CancelledError:
        agent_task.cancel()
        await asyncio.gather(agent_task, return_exceptions=True)
        await tools.settle()
        raise
    if not finished:
        tools.expire()
        agent_task.cancel()
    await asyncio.gather(agent_task, return_exceptions=True)
    await tools.settle()
    record["agent_s"] = round(time.monotonic() - tools.started, 4)
    record["steps"] = tools.steps
    usage = tools.usage.as_dict()
    record["model_calls"] = usage.pop("model_calls")
    record["cost"] = round(usage.pop("cost"), 8)
    record["tokens"] = usage
    crash = None if agent_task.cancelled() else agent_task.exception()

    if tools.timed_out:
        outcome = Outcome.AGENT_TIMEOUT
    elif tools.exhausted:
        outcome = Outcome.BUDGET_EXHAUSTED
    elif task.root_agent and isinstance(crash, ContainerLostError | NotFoundError):
        # Root in its own container can end it (kill the runner): that is the agent's
        # doing, judged (on what could be handed over), never an infra error to retry.
        record["agent_error"] = f"the root agent's container ended: {crash}"
        outcome = Outcome.PASSED  # provisional: the tests decide
    elif crash is not None:
        kind = "the agent failed" if isinstance(crash, AgentError) else "the trial failed"
        if not isinstance(crash, SandboxError):
            logger.error("agent crashed on %s", task.id, exc_info=crash)
        record["error"] = f"{kind}: {type(crash).__name__}: {crash}"
        return Outcome.INFRA_ERROR
    else:
        outcome = Outcome.PASSED  # provisional: the tests decide

    # ---------------------------------------------------------------- the hidden tests
    verdict = await judge_session(sessions, session_id, task, tenant=tenant, record=record)
    # The tests run as information after a timeout or a spent budget, which stays the outcome.
    return (
        verdict
        if verdict is Outcome.INFRA_ERROR
        else outcome
        if outcome is not Outcome.PASSED
        else verdict
    )


# ------------------------------------------------------------------------------ runs


def _check_resume(
    run: RunDir,
    agent: Agent,
    tasks: Sequence[Task],
    epochs: int,
    latest: Mapping[tuple[str, int], Mapping[str, Any]],
) -> dict[str, Any]:
    meta = run.read_meta()
    now = _now()
    task_meta = {
        t.id: {
            "digest": t.digest,
            "category": t.config.category,
            "difficulty": t.difficulty,
            "format": t.format,
            "notes": list(t.notes),
        }
        for t in tasks
    }
    if meta is None:
        return {
            "format": FORMAT_VERSION,
            "agent": agent.describe(),
            "epochs": epochs,
            "tasks": task_meta,
            "created_at": now,
            "updated_at": now,
            "invocations": [],
        }
    previous = meta.get("agent", {}).get("name")
    if previous != agent.name:
        raise InvalidRequestError(
            f"{run.path} holds a run of agent {previous!r}, not {agent.name!r}; "
            "pass another --out (or the same agent to resume)"
        )
    changed = []
    for (task_id, _epoch), record in latest.items():
        current = task_meta.get(task_id)
        if current is not None and record.get("task_digest") != current["digest"]:
            changed.append(task_id)
    if changed:
        raise InvalidRequestError(
            f"{run.path}: task(s) {', '.join(sorted(set(changed)))} changed since their trials "
            "ran; their results would mix two tasks. Use another --out"
        )
    merged = dict(meta.get("tasks") or {})
    merged.update(task_meta)
    meta.update(
        {
            "tasks": merged,
            "epochs": max(int(meta.get("epochs") or 0), epochs),
            "updated_at": now,
        }
    )
    return meta


async def run_eval(
    tasks: Sequence[Task],
    agent: Agent,
    *,
    sessions: SessionManager,
    policies: Mapping[str, Policy],
    out: Path | str,
    epochs: int = 1,
    concurrency: int = 4,
    tenant: str = DEFAULT_TENANT,
    progress: bool | Progress = True,
    retry_infra: bool = True,
    available_images: Iterable[str] | None = None,
) -> RunSummary:
    """Run every task ``epochs`` times, ``concurrency`` at a time; resume what ``out`` holds.

    ``policies`` are the platform's (a task names one); each policy's pool
    ``max`` also bounds how many of its sessions are open at once.
    """
    if not 1 <= epochs <= MAX_EPOCHS:
        raise InvalidRequestError(f"epochs must be between 1 and {MAX_EPOCHS}")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise InvalidRequestError(f"concurrency must be between 1 and {MAX_CONCURRENCY}")
    ids = [task.id for task in tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise InvalidRequestError(f"task ids must be unique; repeated: {duplicates}")
    images = set(available_images) if available_images is not None else None
    for task in tasks:
        if task.config.policy not in policies:
            raise NotFoundError(
                f"{task.path}/task.yaml: policy: no policy {task.config.policy!r} on this "
                f"platform (known: {sorted(policies)}); fix the task or pass --policies"
            )
        if images is not None and task.environment is None and task.config.image not in images:
            raise NotFoundError(
                f"{task.path}/task.yaml: image: {task.config.image!r} is not built; run "
                "`sandbox images build`"
            )
    agent.prepare(tasks)
    run = RunDir(Path(out))
    latest = run.latest()
    meta = _check_resume(run, agent, tasks, epochs, latest)
    meta["invocations"] = [
        *meta.get("invocations", []),
        {"started_at": _now(), "pid": os.getpid(), "concurrency": concurrency, "epochs": epochs},
    ]
    run.write_meta(meta)

    todo: list[tuple[Task, int]] = []
    for epoch in range(epochs):
        for task in tasks:
            record = latest.get((task.id, epoch))
            if record is None or (retry_infra and record.get("outcome") == Outcome.INFRA_ERROR):
                todo.append((task, epoch))
    skipped = len(tasks) * epochs - len(todo)
    bar = (
        progress
        if isinstance(progress, Progress)
        else Progress(len(tasks) * epochs, enabled=bool(progress))
    )
    bar.done = skipped
    pending = {(t.id, e) for t, e in todo}
    for key, record in latest.items():
        if key[1] < epochs and key[0] in ids and key not in pending:
            outcome = str(record.get("outcome"))
            bar.counts[outcome] = bar.counts.get(outcome, 0) + 1
    bar.start(skipped)

    gates: dict[tuple[str, str], asyncio.Semaphore] = {}
    for task in tasks:
        group = (task.config.image, task.config.policy)
        if group not in gates:
            gates[group] = asyncio.Semaphore(min(concurrency, policies[group[1]].pool.max))
    queue: asyncio.Queue[tuple[Task, int]] = asyncio.Queue()
    for item in todo:
        queue.put_nowait(item)
    results = _ResultsFile(run.results_path)
    fresh: dict[tuple[str, int], dict[str, Any]] = {}

    async def worker() -> None:
        while True:
            try:
                task, epoch = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            env = _Trial(sessions, agent, tenant, policies[task.config.policy], run)
            async with gates[(task.config.image, task.config.policy)]:
                record = await _run_trial(env, task, epoch)
            results.append(record)
            fresh[(task.id, epoch)] = record
            bar.update(record)

    try:
        workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(todo)))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
    finally:
        results.close()
        bar.finish()
    merged = {**latest, **fresh}
    records = [merged[(t.id, e)] for e in range(epochs) for t in tasks if (t.id, e) in merged]
    return RunSummary(out=run.path, ran=len(fresh), skipped=skipped, records=records)


async def run_local(
    tasks: Sequence[Task],
    agent: Agent,
    *,
    out: Path | str,
    epochs: int = 1,
    concurrency: int = 4,
    policies_dir: Path | None = None,
    progress: bool | Progress = True,
    retry_infra: bool = True,
) -> RunSummary:
    """:func:`run_eval` on a private, in-process platform (what ``sandbox eval run`` does)."""
    from sandbox.service.platform import Platform, PlatformSettings

    settings = PlatformSettings(warm=[])
    if policies_dir is not None:
        settings = PlatformSettings(warm=[], policies_dir=policies_dir)
    platform = Platform(settings)
    await platform.start()
    try:
        return await run_eval(
            tasks,
            agent,
            sessions=platform.sessions,
            policies=platform.policies,
            out=out,
            epochs=epochs,
            concurrency=concurrency,
            progress=progress,
            retry_infra=retry_infra,
            available_images=platform.images,
        )
    finally:
        await platform.close()
