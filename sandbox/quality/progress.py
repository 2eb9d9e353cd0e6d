"""The progress indicator of a check, on stderr: a bar redrawn in place on a terminal,
a line per phase and every tenth of the work otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import IO, Any

from sandbox.evals.runner import Progress, format_duration

__all__ = ["EvalProgress", "QualityProgress"]


class QualityProgress:
    """Counts runs (trials and judged submissions) as they finish, across phases."""

    WIDTH = 28

    def __init__(self, *, stream: IO[str] | None = None, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.total = 0
        self.done = 0
        self.loopholes = 0
        self.phase = ""
        self.started = time.monotonic()
        self._last_decile = -1

    def _line(self) -> str:
        fraction = self.done / self.total if self.total else 0.0
        filled = int(self.WIDTH * fraction)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        elapsed = time.monotonic() - self.started
        return (
            f"quality [{bar}] {self.done}/{self.total}  {self.phase}  "
            f"probes passed {self.loopholes}  {format_duration(elapsed)}"
        )

    def _draw(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K" + self._line())
            self.stream.flush()

    def begin(self, phase: str, count: int) -> None:
        """A phase of ``count`` more runs starts."""
        self.phase = phase
        self.total += count
        if not self.enabled:
            return
        if self.tty:
            self._draw()
        else:
            self.stream.write(f"quality: {phase}: {count} run(s)\n")
            self.stream.flush()

    def tick(self, *, loophole: bool = False) -> None:
        self.done += 1
        self.loopholes += int(loophole)
        if not self.enabled:
            return
        if self.tty:
            self._draw()
            return
        decile = int(10 * self.done / self.total) if self.total else 10
        if decile > self._last_decile:
            self._last_decile = decile
            self.stream.write(self._line() + "\n")
            self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


class EvalProgress(Progress):
    """What :func:`~sandbox.evals.runner.run_eval` reports to, forwarded to a QualityProgress."""

    def __init__(
        self, quality: QualityProgress, phase: str, count: int, probes: frozenset[str]
    ) -> None:
        super().__init__(count, enabled=False)
        self.quality = quality
        self.probes = probes
        """Ids of the trials whose pass is a loophole."""
        quality.begin(phase, count)

    def start(self, already: int) -> None:
        for _ in range(already):
            self.quality.tick()

    def update(self, record: Mapping[str, Any]) -> None:
        super().update(record)
        loophole = record.get("task") in self.probes and bool(record.get("tests_passed"))
        self.quality.tick(loophole=loophole)

    def finish(self) -> None:
        pass
