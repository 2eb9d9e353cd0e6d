"""Scores of a run: pass rate with its standard error, pass@k, pass^k, usage; per group.

Only scored trials count: an ``infra_error`` has no score and is reported apart.

* **pass rate**: the mean over tasks of each task's fraction of passed trials (every
  task weighs the same however many trials it kept). Its standard error is the
  *clustered* one: the sample standard deviation of the per-task rates over
  ``sqrt(tasks)``. Trials of one task are not independent draws (an easy task
  passes every epoch), so the naive binomial error over trials would be too
  small; over tasks it is honest (Miller 2024, "Adding Error Bars to Evals").
  With a single task it falls back to the binomial error over its trials.
* **pass@k** (Chen et al. 2021, unbiased): the chance that at least one of ``k``
  samples drawn without replacement from a task's ``n`` trials, ``c`` of them
  passed, passes: ``1 - C(n-c, k) / C(n, k)``; averaged over tasks with ``n >= k``.
* **pass^k** (Yao et al. 2024, tau-bench): the chance that all ``k`` such samples
  pass, ``C(c, k) / C(n, k)``: reliability rather than luck.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "TaskStats",
    "mean_and_stderr",
    "pass_at_k",
    "pass_hat_k",
    "summarize",
    "task_stats",
]

MAX_K: Final = 100
OUTCOME_ORDER: Final = (
    "passed",
    "failed",
    "agent_timeout",
    "budget_exhausted",
    "test_timeout",
    "infra_error",
)


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and k >= 1):
        raise ValueError(f"need 0 <= c <= n and k >= 1 (n={n}, c={c}, k={k})")
    if k > n:
        raise ValueError(f"k={k} is more than the n={n} samples")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: ``1 - C(n-c, k) / C(n, k)`` (exact integer arithmetic)."""
    _check(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k, every one of k samples passes: ``C(c, k) / C(n, k)``."""
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def mean_and_stderr(values: Sequence[float]) -> tuple[float, float]:
    """The mean and its standard error (sample standard deviation / sqrt(n)); 0 for n < 2."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = math.fsum(values) / n
    if n < 2:
        return mean, 0.0
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(variance / n)


@dataclass
class TaskStats:
    """One task's trials."""

    task: str
    category: str = "uncategorized"
    difficulty: str = "unrated"
    digest: str | None = None
    n: int = 0
    """Scored trials (everything but infra errors)."""
    passes: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    epochs: dict[int, str] = field(default_factory=dict)
    tokens: int = 0
    steps: int = 0
    agent_s: float = 0.0
    total_s: float = 0.0
    trials: int = 0

    @property
    def rate(self) -> float | None:
        return self.passes / self.n if self.n else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "category": self.category,
            "difficulty": self.difficulty,
            "digest": self.digest,
            "trials": self.trials,
            "n": self.n,
            "passes": self.passes,
            "pass_rate": self.rate,
            "outcomes": {k: self.outcomes[k] for k in OUTCOME_ORDER if self.outcomes[k]},
            "epochs": {str(e): o for e, o in sorted(self.epochs.items())},
            "tokens_mean": self.tokens / self.trials if self.trials else 0.0,
            "steps_mean": self.steps / self.trials if self.trials else 0.0,
            "agent_s_mean": self.agent_s / self.trials if self.trials else 0.0,
        }


def task_stats(records: Iterable[Mapping[str, Any]]) -> dict[str, TaskStats]:
    """Per task, from trial records (the last record of each trial)."""
    stats: dict[str, TaskStats] = {}
    for record in records:
        task = str(record["task"])
        entry = stats.get(task)
        if entry is None:
            entry = stats[task] = TaskStats(
                task=task,
                category=str(record.get("category") or "uncategorized"),
                difficulty=str(record.get("difficulty") or "unrated"),
                digest=record.get("task_digest"),
            )
        outcome = str(record.get("outcome"))
        entry.trials += 1
        entry.outcomes[outcome] += 1
        entry.epochs[int(record.get("epoch", 0))] = outcome
        tokens = record.get("tokens") or {}
        entry.tokens += int(tokens.get("total_tokens") or 0)
        entry.steps += int(record.get("steps") or 0)
        entry.agent_s += float(record.get("agent_s") or 0.0)
        entry.total_s += float(record.get("total_s") or 0.0)
        if record.get("score") is not None:
            entry.n += 1
            entry.passes += int(record["score"])
    return stats


def _group_metrics(tasks: Sequence[TaskStats]) -> dict[str, Any]:
    scored = [t for t in tasks if t.n]
    rates = [t.passes / t.n for t in scored]
    if len(scored) == 1:
        only = scored[0]
        p = only.passes / only.n
        mean, stderr = p, math.sqrt(p * (1 - p) / only.n)
    else:
        mean, stderr = mean_and_stderr(rates)
    largest = max((t.n for t in scored), default=0)
    at_k: dict[str, float] = {}
    hat_k: dict[str, float] = {}
    for k in range(1, min(largest, MAX_K) + 1):
        eligible = [t for t in scored if t.n >= k]
        at_k[str(k)] = math.fsum(pass_at_k(t.n, t.passes, k) for t in eligible) / len(eligible)
        hat_k[str(k)] = math.fsum(pass_hat_k(t.n, t.passes, k) for t in eligible) / len(eligible)
    return {
        "tasks": len(tasks),
        "scored_tasks": len(scored),
        "trials": sum(t.trials for t in tasks),
        "scored_trials": sum(t.n for t in tasks),
        "passes": sum(t.passes for t in tasks),
        "pass_rate": None if math.isnan(mean) else mean,
        "stderr": None if math.isnan(stderr) else stderr,
        "pass_at_k": at_k,
        "pass_hat_k": hat_k,
    }


def summarize(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Everything the report shows, JSON-ready."""
    stats = task_stats(records)
    tasks = list(stats.values())
    outcomes: Counter[str] = Counter(str(r.get("outcome")) for r in records)
    overall = _group_metrics(tasks)
    by_category = {
        name: _group_metrics([t for t in tasks if t.category == name])
        for name in sorted({t.category for t in tasks})
    }
    order = {"easy": 0, "medium": 1, "hard": 2}
    by_difficulty = {
        name: _group_metrics([t for t in tasks if t.difficulty == name])
        for name in sorted({t.difficulty for t in tasks}, key=lambda d: (order.get(d, 9), d))
    }
    trials = len(records)
    tokens = {
        key: sum(int((r.get("tokens") or {}).get(key) or 0) for r in records)
        for key in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
    agent_s = math.fsum(float(r.get("agent_s") or 0.0) for r in records)
    total_s = math.fsum(float(r.get("total_s") or 0.0) for r in records)
    tests_s = math.fsum(float(r.get("tests_s") or 0.0) for r in records)
    steps = sum(int(r.get("steps") or 0) for r in records)
    model_calls = sum(int(r.get("model_calls") or 0) for r in records)
    cost = math.fsum(float(r.get("cost") or 0.0) for r in records)
    return {
        **overall,
        "outcomes": {k: outcomes[k] for k in OUTCOME_ORDER if outcomes[k]}
        | {k: v for k, v in outcomes.items() if k not in OUTCOME_ORDER},
        "infra_errors": outcomes["infra_error"],
        "by_category": by_category,
        "by_difficulty": by_difficulty,
        "usage": {
            **tokens,
            "model_calls": model_calls,
            "cost": cost,
            "cost_per_trial": cost / trials if trials else 0.0,
            "steps": steps,
            "tokens_per_trial": tokens["total_tokens"] / trials if trials else 0.0,
            "steps_per_trial": steps / trials if trials else 0.0,
            "agent_s": agent_s,
            "agent_s_per_trial": agent_s / trials if trials else 0.0,
            "tests_s": tests_s,
            "trial_s": total_s,
            "trial_s_per_trial": total_s / trials if trials else 0.0,
        },
        "per_task": [stats[name].as_dict() for name in sorted(stats)],
    }
