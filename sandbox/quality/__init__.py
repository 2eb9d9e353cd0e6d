"""The environment-quality check: broken tasks and reward loopholes, found before training.

``sandbox quality check PATH...`` (:mod:`sandbox.quality.command`) runs, for
every task directory and JSONL problem set below the paths (:mod:`.targets`,
:mod:`.problems`): schema checks, the reference solution ``runs`` times with
different seeds, negative controls and the probe library of reward hacks
(:mod:`.probes`, :mod:`.hacks`) as evaluator trials (:mod:`.task_checks`) or
judge requests (:mod:`.problem_checks`); then findings (:mod:`.findings`),
near-duplicates (:mod:`.duplicates`) and observed difficulty
(:mod:`.difficulty`), reported by :mod:`.report`.
"""

from .check import QualityReport, run_check
from .model import CheckSettings, Finding, ItemResult, QualityInputError, Severity
from .probes import PROBES, Probe

__all__ = [
    "PROBES",
    "CheckSettings",
    "Finding",
    "ItemResult",
    "Probe",
    "QualityInputError",
    "QualityReport",
    "Severity",
    "run_check",
]
