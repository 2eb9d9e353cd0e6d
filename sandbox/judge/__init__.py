"""Judging code against hidden tests: verdicts and rewards an RL trainer can trust.

:mod:`.judge` (the :class:`Judge`), :mod:`.models` (requests, results, verdicts),
:mod:`.report_parsers` (JUnit XML, ``go test -json``, TAP read on the trusted side),
:mod:`.batches` (``/v1/evaluate``: many submissions streamed, deduplicated, idempotent).
"""

from .judge import Judge
from .models import JudgeRequest, JudgeResult

__all__ = ["Judge", "JudgeRequest", "JudgeResult"]
