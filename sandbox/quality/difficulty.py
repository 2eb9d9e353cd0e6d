"""Observed difficulty: each item's pass rate over past runs or fresh agent trials, bucketed.

Past runs are evaluator run directories or their ``results.jsonl`` (records
with ``task`` and ``score``), or judge result JSONL (records with ``id`` and
``reward``, or ``all_passed``). A task's records are matched by its id, a
problem's by its id or ``<set>/<id>``. Records without a score (infra errors)
do not count.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from sandbox.evals.runner import RunDir, read_results

from .model import ItemResult, QualityInputError, Severity

__all__ = ["BUCKETS", "apply_difficulty", "distribution", "read_history", "record_score"]

BUCKETS: Final = ("too easy", "informative", "too hard")


def record_score(record: Mapping[str, Any]) -> tuple[str, float] | None:
    """``(item id, score in [0, 1])`` of one evaluator or judge record; None if unscored."""
    if "task" in record:
        score = record.get("score")
        return (str(record["task"]), float(score)) if score is not None else None
    if "id" in record:
        if record.get("reward") is not None:
            return str(record["id"]), 1.0 if float(record["reward"]) >= 1.0 else 0.0
        if record.get("all_passed") is not None:
            return str(record["id"]), 1.0 if record["all_passed"] else 0.0
    return None


def _records(path: Path) -> list[dict[str, Any]]:
    if path.is_dir():
        return RunDir(path).read_results()
    if path.name == "results.jsonl":
        return read_results(path)
    records = []
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise QualityInputError(f"--history {path}: cannot read: {exc.strerror}") from None
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def read_history(paths: Iterable[Path]) -> dict[str, list[float]]:
    """Scores by item id across every given run."""
    scores: dict[str, list[float]] = {}
    for path in paths:
        if not path.exists():
            raise QualityInputError(f"--history {path}: no such file or directory")
        for record in _records(path):
            scored = record_score(record)
            if scored is not None:
                scores.setdefault(scored[0], []).append(scored[1])
    return scores


def apply_difficulty(
    items: Sequence[ItemResult],
    scores: Mapping[str, list[float]],
    *,
    too_easy: float,
    too_hard: float,
    source: str,
) -> None:
    """Set each item's observed pass rate and bucket; a finding for the items out of range."""
    for item in items:
        bare = item.key.split("/", 1)[-1]
        observed = scores.get(item.key) or scores.get(bare)
        if not observed:
            continue
        rate = sum(observed) / len(observed)
        bucket = (
            "too easy" if rate >= too_easy else "too hard" if rate <= too_hard else "informative"
        )
        item.difficulty = {
            "pass_rate": round(rate, 4),
            "trials": len(observed),
            "bucket": bucket,
            "source": source,
        }
        if bucket != "informative":
            item.add(
                "difficulty",
                Severity.INFO,
                f"{bucket}: passed {sum(observed):g} of {len(observed)} trials ({source})",
                pass_rate=round(rate, 4),
            )


def distribution(items: Iterable[ItemResult]) -> dict[str, dict[str, int]]:
    """``{category: {bucket: count}}`` over the items with an observed pass rate."""
    out: dict[str, dict[str, int]] = {}
    for item in items:
        if item.difficulty is None:
            continue
        counts = out.setdefault(item.category, dict.fromkeys(BUCKETS, 0))
        counts[item.difficulty["bucket"]] += 1
    return out
