"""The model usage of the runs on disk, for ``/metrics``.

Agent evaluations and training call their model in their own processes, so their
per-call counters (``sandbox_model_*_total``) live there; the service exports what
those runs recorded below ``--runs-dir``: the tokens, calls and cost of every
evaluation's ``results.jsonl`` (per trial) and every training run's ``metrics.jsonl``
(per step), summed by source. A file is read again only when it changed. The
console's overview shows the same sums.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from .runs import find_runs

KINDS = ("prompt", "completion")
# (source, the kind of run, the file of its records)
SOURCES = (("eval", "evaluation", "results.jsonl"), ("rl", "training", "metrics.jsonl"))


def _sums(records: Iterator[dict[str, Any]]) -> dict[str, float]:
    sums = dict.fromkeys(("prompt", "completion", "calls", "cost"), 0.0)
    for record in records:
        nested = record.get("tokens")
        tokens: dict[str, Any] = nested if isinstance(nested, dict) else record
        for kind in KINDS:
            sums[kind] += float(tokens.get(f"{kind}_tokens") or 0)
        sums["calls"] += float(record.get("model_calls") or 0)
        sums["cost"] += float(record.get("cost") or 0)
    return sums


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:  # a line being written, or not ours
                continue
            if isinstance(record, dict):
                yield record


class RunsUsage(Collector):
    """Collects the runs' model usage at scrape time (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[Path, tuple[tuple[float, int], dict[str, float]]] = {}

    def _file_sums(self, path: Path) -> dict[str, float]:
        try:
            stat = path.stat()
        except OSError:
            return _sums(iter(()))
        key = (stat.st_mtime, stat.st_size)
        cached = self._cache.get(path)
        if cached is None or cached[0] != key:
            cached = (key, _sums(_records(path)))
            self._cache[path] = cached
        return cached[1]

    def totals(self) -> dict[str, dict[str, float]]:
        """By source (``eval``, ``rl``): the runs' ``prompt`` and ``completion`` tokens,
        model ``calls`` (evaluations only: a training log counts tokens per step) and
        ``cost``."""
        totals = {}
        for source, kind, name in SOURCES:
            total = _sums(iter(()))
            for run in find_runs(self.root, kind).values():
                for key, value in self._file_sums(run / name).items():
                    total[key] += value
            totals[source] = total
        return totals

    def collect(self) -> Iterator[GaugeMetricFamily]:
        tokens = GaugeMetricFamily(
            "sandbox_runs_model_tokens",
            "Model tokens the runs under --runs-dir recorded, by source and kind.",
            labels=["source", "kind"],
        )
        calls = GaugeMetricFamily(
            "sandbox_runs_model_calls",
            "Model calls the evaluation runs under --runs-dir recorded.",
            labels=["source"],
        )
        cost = GaugeMetricFamily(
            "sandbox_runs_model_cost",
            "What the runs' tokens cost at the prices they were run with.",
            labels=["source"],
        )
        for source, total in self.totals().items():
            for token_kind in KINDS:
                tokens.add_metric([source, token_kind], total[token_kind])
            if source == "eval":  # a training log counts tokens per step, not calls
                calls.add_metric([source], total["calls"])
            cost.add_metric([source], total["cost"])
        yield from (tokens, calls, cost)


class RunsUsageMetrics:
    """The Prometheus text of a :class:`RunsUsage`."""

    def __init__(self, usage: RunsUsage) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(usage)

    def text(self) -> bytes:
        return generate_latest(self.registry)
