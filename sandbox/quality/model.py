"""What the quality check finds: findings, per-item results, the settings of a check."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from sandbox.errors import InvalidRequestError

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_PROBE_TIMEOUT_S",
    "DEFAULT_RUNS",
    "CheckSettings",
    "Finding",
    "ItemResult",
    "QualityInputError",
    "Severity",
    "TrialSummary",
]

DEFAULT_RUNS: Final = 3
MAX_RUNS: Final = 50
DEFAULT_CONCURRENCY: Final = 4
MAX_CONCURRENCY: Final = 64
DEFAULT_PROBE_TIMEOUT_S: Final = 30.0
DEFAULT_PROBLEM_PROBE_TIMEOUT_S: Final = 1.0
DEFAULT_TOO_EASY: Final = 0.95
DEFAULT_TOO_HARD: Final = 0.05


class QualityInputError(InvalidRequestError):
    """A path, a problem file or an option of the check is refused (exit 2)."""


class Severity(StrEnum):
    """How bad a finding is; ``broken`` and ``loophole`` fail the check."""

    BROKEN = "broken"
    LOOPHOLE = "loophole"
    WARNING = "warning"
    INFO = "info"


FAILING: Final = frozenset({Severity.BROKEN, Severity.LOOPHOLE})


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a task or problem: which check, how bad, why."""

    check: str
    """schema, consistency, reference, control, probe, determinism, duplicate, difficulty"""
    severity: Severity
    message: str
    probe: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "check": self.check,
            "severity": self.severity.value,
            "message": self.message,
        }
        if self.probe is not None:
            out["probe"] = self.probe
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass
class TrialSummary:
    """One run of one submission (reference, control or probe) against the hidden tests."""

    label: str
    passed: bool | None
    """None: no verdict (the platform failed, or the run was skipped)."""
    outcome: str
    reason: str | None = None
    seconds: float = 0.0
    tests: dict[str, str] = field(default_factory=dict)
    """Verdict of every test that did not pass (tasks), or of every test (problems)."""
    counts: dict[str, int] | None = None
    trajectory: str | None = None
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "label": self.label,
            "passed": self.passed,
            "outcome": self.outcome,
            "seconds": round(self.seconds, 3),
        }
        for key in ("reason", "counts", "trajectory", "note"):
            value = getattr(self, key)
            if value:
                out[key] = value
        if self.tests:
            out["tests"] = self.tests
        return out


@dataclass
class ItemResult:
    """Everything the check learned about one task or problem."""

    key: str
    """Unique in the report: a task's id, ``<set>/<id>`` for a problem."""
    kind: str
    """``task`` or ``problem``"""
    source: str
    category: str = "uncategorized"
    language: str | None = None
    declared_difficulty: str | None = None
    findings: list[Finding] = field(default_factory=list)
    references: list[TrialSummary] = field(default_factory=list)
    controls: dict[str, TrialSummary] = field(default_factory=dict)
    probes: dict[str, TrialSummary] = field(default_factory=dict)
    difficulty: dict[str, Any] | None = None
    loaded: bool = True
    """False when the item could not even be loaded (its schema finding says why)."""

    def add(
        self,
        check: str,
        severity: Severity,
        message: str,
        *,
        probe: str | None = None,
        **detail: Any,
    ) -> None:
        self.findings.append(Finding(check, severity, message, probe, dict(detail)))

    @property
    def status(self) -> str:
        """broken > loophole > warning > ok."""
        severities = {f.severity for f in self.findings}
        for severity in (Severity.BROKEN, Severity.LOOPHOLE, Severity.WARNING):
            if severity in severities:
                return severity.value
        return "ok"

    @property
    def failing(self) -> bool:
        return any(f.severity in FAILING for f in self.findings)

    def column(self, check: str) -> str:
        """The worst severity of one check's findings: 'ok' when it has none."""
        severities = {f.severity for f in self.findings if f.check == check}
        for severity in Severity:
            if severity in severities:
                return severity.value
        return "ok"

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "source": self.source,
            "category": self.category,
            "language": self.language,
            "declared_difficulty": self.declared_difficulty,
            "status": self.status,
            "loaded": self.loaded,
            "findings": [f.as_dict() for f in self.findings],
            "references": [r.as_dict() for r in self.references],
            "controls": {k: v.as_dict() for k, v in self.controls.items()},
            "probes": {k: v.as_dict() for k, v in self.probes.items()},
            "difficulty": self.difficulty,
        }


@dataclass(frozen=True)
class CheckSettings:
    """The knobs of one check (the command line's options)."""

    runs: int = DEFAULT_RUNS
    """Runs of each reference solution (with seeds ``seed .. seed + runs - 1``)."""
    seed: int = 1
    concurrency: int = DEFAULT_CONCURRENCY
    probes: tuple[str, ...] | None = None
    """Only these probes (None: the whole library); an empty tuple runs none."""
    probe_sample: int | None = None
    """Only this many probes per item, in rotation from the seed (None: every selected probe)."""
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S
    """Hidden tests of a task's controls and probes stop after this (or the task's own limit)."""
    problem_probe_timeout_s: float = DEFAULT_PROBLEM_PROBE_TIMEOUT_S
    """Per-test time limit of a problem's controls and probes (or the problem's own, if lower)."""
    history: tuple[Path, ...] = ()
    """Past evaluation runs (run directories, results.jsonl files or judge result JSONL)."""
    agent_k: int = 0
    """With an agent: trials per task for the difficulty check."""
    too_easy: float = DEFAULT_TOO_EASY
    too_hard: float = DEFAULT_TOO_HARD
    keep: Path | None = None
    """Keep the run directories (trajectories of every trial) here."""
    duplicate_threshold: float = 0.85

    def validate(self) -> None:
        """Refuse settings out of range, naming the option."""
        if not 1 <= self.runs <= MAX_RUNS:
            raise QualityInputError(f"--runs must be between 1 and {MAX_RUNS} (got {self.runs})")
        if not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise QualityInputError(
                f"--concurrency must be between 1 and {MAX_CONCURRENCY} (got {self.concurrency})"
            )
        if not 0 < self.probe_timeout_s <= 3600:
            raise QualityInputError("--probe-timeout must be above 0 and at most 3600 seconds")
        if not 0 < self.problem_probe_timeout_s <= 60:
            raise QualityInputError("--problem-probe-timeout must be above 0 and at most 60")
        if not 0 <= self.too_hard < self.too_easy <= 1:
            raise QualityInputError(
                "--too-hard must be below --too-easy, both between 0 and 1 "
                f"(got {self.too_hard} and {self.too_easy})"
            )
        if self.probe_sample is not None and self.probe_sample < 1:
            raise QualityInputError("--probe-sample must be at least 1")
        if not 0 <= self.agent_k <= 100:
            raise QualityInputError("--k must be between 1 and 100")
        if not 0 < self.duplicate_threshold <= 1:
            raise QualityInputError("--duplicate-threshold must be above 0 and at most 1")
