"""The no-regression gate: a candidate run against a baseline, task by task.

:func:`compare_runs` pairs the two runs' tasks, and asks whether the candidate's
mean per-task pass rate is lower than the baseline's by more than chance.

**The test.** For each task we have the baseline's ``c_b`` passes of ``n_b``
scored trials and the candidate's ``c_c`` of ``n_c``. The statistic is the mean
over tasks of the difference in pass rates, ``D = mean_t(c_c/n_c - c_b/n_b)``.
Under the null hypothesis "on each task, the two agents pass with the same
probability" (which may differ from task to task), the ``n_b + n_c`` trials of
a task are exchangeable, so conditional on the task's total passes the
candidate's share is hypergeometric, independently across tasks. The p-value
is the exact probability, under that null, of a ``D`` at most as large as the
one observed, computed by convolving the per-task hypergeometric laws (no
sampling, no normal approximation). This is an exact *stratified permutation
test* (the conditional test behind Cochran-Mantel-Haenszel): it keeps the
pairing by task, lets easy and hard tasks differ freely, uses every epoch, and
is valid for the handful of tasks and epochs evaluations actually have. With
one trial per side per task it is exactly the sign test (McNemar's exact test)
over the tasks that changed. It answers "is the candidate worse *on these
tasks* beyond the agents' own randomness", which is the question a gate asks;
it does not claim the difference generalises to other tasks.

A **regression** is ``p < alpha`` (default 0.05) *and* a mean drop of more than
``min_drop`` (default 0.01): significant and not negligible. Tasks present in
only one run, or with only infra errors on a side, are listed and left out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Final, NamedTuple

from sandbox.errors import InvalidRequestError, NotFoundError

from .metrics import task_stats
from .runner import read_results

__all__ = [
    "Comparison",
    "TaskPair",
    "TestResult",
    "compare_runs",
    "compare_stats",
    "hypergeometric",
    "load_task_counts",
    "stratified_test",
]

DEFAULT_ALPHA: Final = 0.05
DEFAULT_MIN_DROP: Final = 0.01
MAX_SUPPORT: Final = 20_000
MAX_SCALE: Final = 10**6


def hypergeometric(total: int, successes: int, draws: int) -> list[Fraction]:
    """``P(X = x)`` for ``x = 0..draws``: successes among ``draws`` of ``total`` items."""
    denominator = math.comb(total, draws)
    return [
        Fraction(math.comb(successes, x) * math.comb(total - successes, draws - x), denominator)
        for x in range(draws + 1)
    ]


class TestResult(NamedTuple):
    """The stratified test's answer."""

    delta: float
    """Mean over tasks of the candidate's minus the baseline's pass rate."""
    p_lower: float
    """P(statistic <= observed) under the null: small means a regression."""
    p_upper: float
    """P(statistic >= observed) under the null: small means an improvement."""
    method: str
    """``exact``, or ``normal`` when the exact law has too many points to enumerate."""


def stratified_test(pairs: Sequence[tuple[int, int, int, int]]) -> TestResult:
    """The test of the module docstring on per-task ``(n_base, c_base, n_cand, c_cand)``.

    Exact by convolution on an integer lattice (the statistic times the least
    common multiple of the trial counts). When that lattice would be too large
    (many tasks *and* many different trial counts, so many tasks that the
    central limit theorem holds well) the law of the sum of the independent
    per-task terms is taken as normal with their exact means and variances.
    """
    if not pairs:
        raise ValueError("no task to compare")
    for n_b, c_b, n_c, c_c in pairs:
        if not (n_b >= 1 and n_c >= 1 and 0 <= c_b <= n_b and 0 <= c_c <= n_c):
            raise ValueError(f"bad counts {(n_b, c_b, n_c, c_c)}")
    tasks = len(pairs)
    scale = math.lcm(*(n for n_b, _, n_c, _ in pairs for n in (n_b, n_c)))
    observed = sum(c_c * (scale // n_c) - c_b * (scale // n_b) for n_b, c_b, n_c, c_c in pairs)
    delta = observed / scale / tasks
    if scale <= MAX_SCALE:
        distribution = _exact_law(pairs, scale)
        if distribution is not None:
            lower = math.fsum(p for v, p in distribution.items() if v <= observed)
            upper = math.fsum(p for v, p in distribution.items() if v >= observed)
            return TestResult(delta, min(1.0, lower), min(1.0, upper), "exact")
    mean = variance = 0.0
    for n_b, c_b, n_c, c_c in pairs:
        s, total = c_b + c_c, n_b + n_c
        # X ~ Hypergeometric(total, s, n_c); d = X (1/n_c + 1/n_b) - s/n_b.
        ex = n_c * s / total
        vx = 0.0
        if total > 1:
            vx = n_c * s * (total - s) * (total - n_c) / (total * total * (total - 1))
        slope = 1 / n_c + 1 / n_b
        mean += ex * slope - s / n_b
        variance += vx * slope * slope
    if variance <= 0:
        return TestResult(delta, 1.0, 1.0, "normal")
    z = (observed / scale - mean) / math.sqrt(variance)
    return TestResult(delta, _phi(z), 1.0 - _phi(z), "normal")


def _exact_law(pairs: Sequence[tuple[int, int, int, int]], scale: int) -> dict[int, float] | None:
    """The null law of ``scale * sum_t d_t``, or None when its support grows too large."""
    distribution: dict[int, float] = {0: 1.0}
    for n_b, c_b, n_c, c_c in pairs:
        s, total = c_b + c_c, n_b + n_c
        probabilities = hypergeometric(total, s, n_c)
        step = {
            x * (scale // n_c) - (s - x) * (scale // n_b): float(probabilities[x])
            for x in range(max(0, s - n_b), min(s, n_c) + 1)
        }
        if len(step) == 1:
            shift = next(iter(step))
            distribution = {v + shift: p for v, p in distribution.items()}
            continue
        combined: dict[int, float] = {}
        for value, p in distribution.items():
            for offset, q in step.items():
                key = value + offset
                combined[key] = combined.get(key, 0.0) + p * q
        if len(combined) > MAX_SUPPORT:
            return None
        distribution = combined
    return distribution


def _phi(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


@dataclass(frozen=True)
class TaskCounts:
    n: int
    passes: int
    digest: str | None = None
    category: str = "uncategorized"


@dataclass(frozen=True)
class TaskPair:
    task: str
    baseline: TaskCounts
    candidate: TaskCounts
    p_lower: float
    """One-sided exact p-value of this task alone (Fisher's exact test)."""

    @property
    def delta(self) -> float:
        return self.candidate.passes / self.candidate.n - self.baseline.passes / self.baseline.n


@dataclass
class Comparison:
    """The gate's answer; :attr:`regression` is what a trainer checks."""

    baseline: str
    candidate: str
    pairs: list[TaskPair]
    only_baseline: list[str]
    only_candidate: list[str]
    excluded: list[str]
    baseline_rate: float
    candidate_rate: float
    delta: float
    p_regression: float
    p_improvement: float
    alpha: float
    min_drop: float
    method: str = "exact"
    changed_tasks: list[str] = field(default_factory=list)
    """Tasks whose content (digest) differs between the runs."""

    @property
    def regression(self) -> bool:
        return self.p_regression < self.alpha and -self.delta > self.min_drop

    @property
    def improvement(self) -> bool:
        return self.p_improvement < self.alpha and self.delta > self.min_drop

    @property
    def verdict(self) -> str:
        if self.regression:
            return "REGRESSION"
        if self.improvement:
            return "improvement"
        return "no significant change"

    def as_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "verdict": self.verdict,
            "regression": self.regression,
            "baseline_rate": self.baseline_rate,
            "candidate_rate": self.candidate_rate,
            "delta": self.delta,
            "p_regression": self.p_regression,
            "p_improvement": self.p_improvement,
            "alpha": self.alpha,
            "min_drop": self.min_drop,
            "method": self.method,
            "tasks": [
                {
                    "task": p.task,
                    "baseline": {"n": p.baseline.n, "passes": p.baseline.passes},
                    "candidate": {"n": p.candidate.n, "passes": p.candidate.passes},
                    "delta": p.delta,
                    "p_lower": p.p_lower,
                }
                for p in self.pairs
            ],
            "only_baseline": self.only_baseline,
            "only_candidate": self.only_candidate,
            "excluded": self.excluded,
            "changed_tasks": self.changed_tasks,
        }

    def table(self) -> str:
        """A plain-text table of the tasks and the verdict."""
        width = max([len("TASK"), *(len(p.task) for p in self.pairs)])
        lines = [
            f"baseline:  {self.baseline}",
            f"candidate: {self.candidate}",
            "",
            f"{'TASK':<{width}}  {'BASELINE':>10}  {'CANDIDATE':>10}  {'DELTA':>7}  {'P':>6}",
        ]
        for p in sorted(self.pairs, key=lambda p: (p.delta, p.task)):
            mark = " v" if p.delta < 0 else (" ^" if p.delta > 0 else "")
            lines.append(
                f"{p.task:<{width}}  {p.baseline.passes:>4}/{p.baseline.n:<5}  "
                f"{p.candidate.passes:>4}/{p.candidate.n:<5}  {p.delta:>+7.2f}  "
                f"{p.p_lower:>6.3f}{mark}"
            )
        lines.append("")
        lines.append(
            f"pass rate {self.baseline_rate:.3f} -> {self.candidate_rate:.3f} "
            f"(delta {self.delta:+.3f}) over {len(self.pairs)} tasks; "
            f"p(regression) = {self.p_regression:.4g}, p(improvement) = "
            f"{self.p_improvement:.4g} ({self.method} stratified permutation test)"
        )
        for label, names in (
            ("only in the baseline", self.only_baseline),
            ("only in the candidate", self.only_candidate),
            ("left out (no scored trial on a side)", self.excluded),
            ("changed between the runs (digest differs)", self.changed_tasks),
        ):
            if names:
                lines.append(f"{label}: {', '.join(names)}")
        lines.append(
            f"verdict: {self.verdict} (regression = p < {self.alpha:g} and drop > "
            f"{self.min_drop:g})"
        )
        return "\n".join(lines)


def load_task_counts(path: Path | str) -> dict[str, TaskCounts]:
    """Per-task scored trials and passes from a run directory, a results.jsonl or a report."""
    source = Path(path)
    if source.is_dir():
        results = source / "results.jsonl"
        if not results.is_file():
            raise NotFoundError(f"{source}: no results.jsonl; is it a run directory?")
        source = results
    if not source.is_file():
        raise NotFoundError(f"{source}: no such run directory or report")
    if source.suffix == ".jsonl":
        latest = {(r["task"], r["epoch"]): r for r in read_results(source)}
        stats = task_stats(latest.values())
        return {name: TaskCounts(s.n, s.passes, s.digest, s.category) for name, s in stats.items()}
    try:
        report = json.loads(source.read_text())
        rows = report["metrics"]["per_task"]
        return {
            str(row["task"]): TaskCounts(
                int(row["n"]), int(row["passes"]), row.get("digest"), row.get("category", "")
            )
            for row in rows
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidRequestError(
            f"{source}: not a report JSON (metrics.per_task with task, n, passes): {exc}"
        ) from None


def compare_stats(
    baseline: Mapping[str, TaskCounts],
    candidate: Mapping[str, TaskCounts],
    *,
    alpha: float = DEFAULT_ALPHA,
    min_drop: float = DEFAULT_MIN_DROP,
    baseline_name: str = "baseline",
    candidate_name: str = "candidate",
) -> Comparison:
    """The comparison of two runs' per-task counts (see the module docstring)."""
    common = sorted(set(baseline) & set(candidate))
    excluded = [t for t in common if not baseline[t].n or not candidate[t].n]
    paired = [t for t in common if t not in excluded]
    if not paired:
        raise InvalidRequestError(
            "the runs share no task with scored trials on both sides; nothing to compare"
        )
    pairs = []
    for task in paired:
        b, c = baseline[task], candidate[task]
        single = stratified_test([(b.n, b.passes, c.n, c.passes)])
        pairs.append(TaskPair(task, b, c, single.p_lower))
    test = stratified_test(
        [(p.baseline.n, p.baseline.passes, p.candidate.n, p.candidate.passes) for p in pairs]
    )
    changed = [
        t
        for t in paired
        if baseline[t].digest and candidate[t].digest and baseline[t].digest != candidate[t].digest
    ]
    return Comparison(
        baseline=baseline_name,
        candidate=candidate_name,
        pairs=pairs,
        only_baseline=sorted(set(baseline) - set(candidate)),
        only_candidate=sorted(set(candidate) - set(baseline)),
        excluded=excluded,
        baseline_rate=math.fsum(p.baseline.passes / p.baseline.n for p in pairs) / len(pairs),
        candidate_rate=math.fsum(p.candidate.passes / p.candidate.n for p in pairs) / len(pairs),
        delta=test.delta,
        p_regression=test.p_lower,
        p_improvement=test.p_upper,
        method=test.method,
        alpha=alpha,
        min_drop=min_drop,
        changed_tasks=changed,
    )


def compare_runs(
    baseline: Path | str,
    candidate: Path | str,
    *,
    alpha: float = DEFAULT_ALPHA,
    min_drop: float = DEFAULT_MIN_DROP,
) -> Comparison:
    """The gate: compare two run directories (or results.jsonl, or report JSON files).

    ``compare_runs(base, new).regression`` is True when the candidate is worse
    beyond noise; ``sandbox eval compare`` exits 1 then.
    """
    if not 0 < alpha < 1:
        raise InvalidRequestError("alpha must be between 0 and 1")
    if min_drop < 0:
        raise InvalidRequestError("min_drop must not be negative")
    return compare_stats(
        load_task_counts(baseline),
        load_task_counts(candidate),
        alpha=alpha,
        min_drop=min_drop,
        baseline_name=str(baseline),
        candidate_name=str(candidate),
    )
