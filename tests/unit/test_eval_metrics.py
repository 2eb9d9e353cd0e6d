"""Evaluation metrics and the regression gate's test, against hand-worked values.

pass@k and pass^k are checked against values worked out by hand from their
binomial formulas, the standard errors against hand arithmetic, and the
stratified permutation test against brute-force enumeration of every
relabelling of small hand-made runs.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import pytest

from sandbox.errors import InvalidRequestError
from sandbox.evals import compare
from sandbox.evals.compare import TaskCounts, compare_stats, hypergeometric, stratified_test
from sandbox.evals.metrics import mean_and_stderr, pass_at_k, pass_hat_k, summarize

# ------------------------------------------------------------------------------ pass@k


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 2 / 5),  # 1 - C(3,1)/C(5,1) = 1 - 3/5
        (5, 2, 2, 7 / 10),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 3, 9 / 10),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (5, 2, 4, 1.0),  # only 3 failures: any 4 samples hold a pass
        (10, 3, 3, 1 - 35 / 120),  # 1 - C(7,3)/C(10,3)
        (4, 0, 2, 0.0),
        (4, 4, 1, 1.0),
        (1, 1, 1, 1.0),
    ],
)
def test_pass_at_k_hand_worked(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 2 / 5),  # pass^1 is the plain rate
        (5, 2, 2, 1 / 10),  # C(2,2)/C(5,2)
        (5, 3, 2, 3 / 10),  # C(3,2)/C(5,2)
        (5, 2, 3, 0.0),  # cannot draw 3 passes out of 2
        (5, 5, 5, 1.0),
        (10, 7, 3, 35 / 120),  # C(7,3)/C(10,3)
    ],
)
def test_pass_hat_k_hand_worked(n: int, c: int, k: int, expected: float) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_the_stable_product_form() -> None:
    """Chen et al.'s numerically stable form: 1 - prod_{i=n-c+1}^{n} (1 - k/i)."""
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                if n - c < k:
                    stable = 1.0
                else:
                    stable = 1.0 - math.prod(1 - k / i for i in range(n - c + 1, n + 1))
                assert pass_at_k(n, c, k) == pytest.approx(stable, abs=1e-9)
                # pass^k of the passes is pass@k's complement seen from the failures
                assert pass_hat_k(n, c, k) == pytest.approx(1 - pass_at_k(n, n - c, k), abs=1e-9)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_refuses_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


# ------------------------------------------------------------------------------ stderr


def test_mean_and_stderr() -> None:
    # mean 1/2; sample variance (4 * 1/4) / 3 = 1/3; stderr sqrt(1/3 / 4) = sqrt(1/12)
    mean, se = mean_and_stderr([1, 0, 1, 0])
    assert mean == 0.5
    assert se == pytest.approx(math.sqrt(1 / 12))
    assert mean_and_stderr([0.25]) == (0.25, 0.0)
    assert all(math.isnan(x) for x in mean_and_stderr([]))


def _record(task: str, epoch: int, outcome: str, **extra: Any) -> dict[str, Any]:
    score = None if outcome == "infra_error" else int(outcome == "passed")
    return {
        "task": task,
        "epoch": epoch,
        "outcome": outcome,
        "score": score,
        "category": extra.pop("category", "bugfix"),
        "difficulty": extra.pop("difficulty", "easy"),
        **extra,
    }


def test_summarize_by_hand() -> None:
    records = [
        _record("a", 0, "passed", tokens={"total_tokens": 100, "prompt_tokens": 90}, steps=3),
        _record("a", 1, "passed", tokens={"total_tokens": 50, "prompt_tokens": 40}, steps=1),
        _record("a", 2, "failed", agent_s=2.0),
        _record("a", 3, "infra_error"),
        _record("b", 0, "agent_timeout", category="cli", difficulty="hard", agent_s=4.0),
        _record("b", 1, "test_timeout", category="cli", difficulty="hard"),
        _record("b", 2, "budget_exhausted", category="cli", difficulty="hard"),
    ]
    m = summarize(records)
    # per-task rates: a 2/3 (the infra error is not scored), b 0/3
    assert m["pass_rate"] == pytest.approx(1 / 3)
    # sample sd of (2/3, 0) is sqrt(2/9); over sqrt(2) tasks: 1/3
    assert m["stderr"] == pytest.approx(1 / 3)
    assert m["trials"] == 7 and m["scored_trials"] == 6 and m["passes"] == 2
    assert m["infra_errors"] == 1
    assert m["outcomes"] == {
        "passed": 2,
        "failed": 1,
        "agent_timeout": 1,
        "budget_exhausted": 1,
        "test_timeout": 1,
        "infra_error": 1,
    }
    # pass@2: a: 1 - C(1,2)/C(3,2) = 1; b: 0 -> 1/2.  pass^2: a: C(2,2)/C(3,2) = 1/3; b: 0
    assert m["pass_at_k"]["2"] == pytest.approx(0.5)
    assert m["pass_hat_k"]["2"] == pytest.approx(1 / 6)
    assert m["pass_at_k"]["1"] == pytest.approx(1 / 3)
    assert set(m["pass_at_k"]) == {"1", "2", "3"}
    assert m["by_category"]["bugfix"]["pass_rate"] == pytest.approx(2 / 3)
    # one task alone: the binomial error over its trials, sqrt(p (1-p) / n)
    assert m["by_category"]["bugfix"]["stderr"] == pytest.approx(math.sqrt(2 / 9 / 3))
    assert m["by_difficulty"]["hard"]["pass_rate"] == 0.0
    assert list(m["by_difficulty"]) == ["easy", "hard"]
    assert m["usage"]["total_tokens"] == 150 and m["usage"]["prompt_tokens"] == 130
    assert m["usage"]["steps"] == 4
    assert m["usage"]["agent_s"] == pytest.approx(6.0)
    per_task = {t["task"]: t for t in m["per_task"]}
    assert per_task["a"]["n"] == 3 and per_task["a"]["passes"] == 2
    assert per_task["a"]["epochs"] == {
        "0": "passed",
        "1": "passed",
        "2": "failed",
        "3": "infra_error",
    }


def test_summarize_only_infra_errors_has_no_rate() -> None:
    m = summarize([_record("a", 0, "infra_error")])
    assert m["pass_rate"] is None and m["pass_at_k"] == {}
    assert m["per_task"][0]["pass_rate"] is None


# ------------------------------------------------------------------------------ the test


def test_hypergeometric_by_hand() -> None:
    # 5 trials, 3 passes, the candidate holds 2 of them: C(3,x) C(2,2-x) / C(5,2)
    assert hypergeometric(5, 3, 2) == [Fraction(1, 10), Fraction(6, 10), Fraction(3, 10)]
    assert sum(hypergeometric(9, 4, 5)) == 1


def _brute_force(pairs: list[tuple[int, int, int, int]]) -> tuple[float, float]:
    """P(D <= observed) and P(D >= observed) by enumerating every relabelling."""
    per_task = []
    observed = Fraction(0)
    for n_b, c_b, n_c, c_c in pairs:
        trials = [1] * (c_b + c_c) + [0] * (n_b + n_c - c_b - c_c)
        observed += Fraction(c_c, n_c) - Fraction(c_b, n_b)
        values = []
        for chosen in itertools.combinations(range(len(trials)), n_c):
            cand = sum(trials[i] for i in chosen)
            base = sum(trials) - cand
            values.append(Fraction(cand, n_c) - Fraction(base, n_b))
        per_task.append(values)
    total = lower = upper = 0
    for combination in itertools.product(*per_task):
        value = sum(combination, Fraction(0))
        total += 1
        lower += value <= observed
        upper += value >= observed
    return lower / total, upper / total


@pytest.mark.parametrize(
    "pairs",
    [
        [(1, 1, 1, 0)] * 3,
        [(2, 2, 2, 0)] * 3,
        [(3, 2, 2, 1), (4, 4, 1, 0)],
        [(2, 1, 3, 0), (1, 1, 2, 2), (3, 1, 3, 2)],
        [(3, 2, 3, 1), (3, 1, 3, 1), (3, 3, 3, 2)],
        [(1, 0, 1, 0), (1, 1, 1, 1), (2, 1, 2, 0)],
    ],
)
def test_stratified_test_equals_brute_force(pairs: list[tuple[int, int, int, int]]) -> None:
    result = stratified_test(pairs)
    lower, upper = _brute_force(pairs)
    assert result.method == "exact"
    assert result.p_lower == pytest.approx(lower, abs=1e-12)
    assert result.p_upper == pytest.approx(upper, abs=1e-12)


def test_stratified_test_hand_cases() -> None:
    # Three tasks that all went from pass to fail, one trial each: 1/2^3.
    r = stratified_test([(1, 1, 1, 0)] * 3)
    assert (r.delta, r.p_lower, r.p_upper) == (-1.0, 0.125, 1.0)
    # Two epochs each: per task the candidate holds both failures with 1/C(4,2) = 1/6.
    assert stratified_test([(2, 2, 2, 0)] * 3).p_lower == pytest.approx(1 / 216)
    # By hand: task 1 d in {-1, -1/6, 2/3} w.p. {.1, .6, .3}; task 2 d in {-1, 1/4} w.p.
    # {.2, .8}; observed -1/6 - 1 = -7/6; P(<= -7/6) = .1 * .2 + .6 * .2 = .14
    assert stratified_test([(3, 2, 2, 1), (4, 4, 1, 0)]).p_lower == pytest.approx(0.14)
    # Identical runs: no evidence either way. Only the 1-of-3 task can vary: the candidate
    # holds 0, 1 or 2 of its 2 passes w.p. C(4,3)/C(6,3) = .2, .6, .2; P(D <= 0) = .8.
    same = stratified_test([(3, 3, 3, 3), (3, 0, 3, 0), (3, 1, 3, 1)])
    assert same.delta == 0.0
    assert same.p_lower == pytest.approx(0.8) and same.p_upper == pytest.approx(0.8)


def test_one_epoch_is_the_exact_sign_test() -> None:
    # 20 tasks got worse, 5 better, 10 unchanged: P(Bin(25, 1/2) >= 20)
    pairs = [(1, 1, 1, 0)] * 20 + [(1, 0, 1, 1)] * 5 + [(1, 1, 1, 1)] * 10
    expected = sum(math.comb(25, k) for k in range(20, 26)) / 2**25
    assert stratified_test(pairs).p_lower == pytest.approx(expected, rel=1e-9)


def test_normal_fallback_is_close_to_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = [
        (3 + i % 3, (i * 7) % (4 + i % 3), 4 + i % 2, (i * 5) % (5 + i % 2)) for i in range(60)
    ]
    pairs = [(nb, min(cb, nb), nc, min(cc, nc)) for nb, cb, nc, cc in pairs]
    exact = stratified_test(pairs)
    monkeypatch.setattr(compare, "MAX_SUPPORT", 1)
    approx = stratified_test(pairs)
    assert exact.method == "exact" and approx.method == "normal"
    assert approx.p_lower == pytest.approx(exact.p_lower, abs=0.03)


def test_stratified_test_refuses_bad_counts() -> None:
    with pytest.raises(ValueError):
        stratified_test([])
    with pytest.raises(ValueError):
        stratified_test([(0, 0, 1, 1)])
    with pytest.raises(ValueError):
        stratified_test([(1, 2, 1, 1)])


# ------------------------------------------------------------------------------ the gate


def _counts(rates: dict[str, tuple[int, int]]) -> dict[str, TaskCounts]:
    return {task: TaskCounts(n, c) for task, (n, c) in rates.items()}


def test_gate_fires_on_a_planted_regression_and_not_on_a_rerun() -> None:
    base = _counts({"a": (2, 2), "b": (2, 2), "c": (2, 2)})
    worse = _counts({"a": (2, 0), "b": (2, 0), "c": (2, 0)})
    gate = compare_stats(base, worse)
    assert gate.regression and gate.verdict == "REGRESSION"
    assert gate.p_regression == pytest.approx(1 / 216)
    assert "REGRESSION" in gate.table()
    rerun = compare_stats(base, base)
    assert not rerun.regression and rerun.p_regression == pytest.approx(1.0)
    # The reverse is an improvement, never a regression.
    better = compare_stats(worse, base)
    assert better.improvement and not better.regression


def test_gate_needs_both_significance_and_size() -> None:
    base = _counts({"a": (2, 2), "b": (2, 2), "c": (2, 2)})
    worse = _counts({"a": (2, 0), "b": (2, 0), "c": (2, 0)})
    assert not compare_stats(base, worse, min_drop=1.0).regression  # drop must exceed it
    # One task lost, out of three, one trial each: a third of a point but p = 1/2.
    small = compare_stats(
        _counts({"a": (1, 1), "b": (1, 1), "c": (1, 1)}),
        _counts({"a": (1, 0), "b": (1, 1), "c": (1, 1)}),
    )
    assert small.delta == pytest.approx(-1 / 3)
    assert small.p_regression == pytest.approx(0.5)
    assert not small.regression


def test_gate_pairs_tasks_and_reports_the_rest() -> None:
    base = _counts({"a": (2, 2), "b": (2, 1), "only-base": (1, 1), "lost": (2, 2)})
    cand = _counts({"a": (2, 2), "b": (2, 1), "only-cand": (1, 0), "lost": (0, 0)})
    gate = compare_stats(base, cand)
    assert [p.task for p in gate.pairs] == ["a", "b"]
    assert gate.only_baseline == ["only-base"] and gate.only_candidate == ["only-cand"]
    assert gate.excluded == ["lost"]
    with pytest.raises(InvalidRequestError):
        compare_stats(_counts({"a": (1, 1)}), _counts({"b": (1, 1)}))
