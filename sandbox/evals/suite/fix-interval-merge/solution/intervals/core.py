"""Operations on closed intervals given as ``(start, end)`` pairs."""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[float, float]


def _checked(intervals: Iterable[Interval]) -> list[Interval]:
    checked = []
    for start, end in intervals:
        if start > end:
            raise ValueError(f"interval ({start}, {end}) ends before it starts")
        checked.append((start, end))
    return checked


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Merge overlapping or touching intervals; the result is sorted by start."""
    merged: list[Interval] = []
    for start, end in sorted(_checked(intervals)):
        if merged and start <= merged[-1][1]:
            last_start, last_end = merged[-1]
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def total_length(intervals: Iterable[Interval]) -> float:
    """The length of the union of the intervals."""
    return sum(end - start for start, end in merge(intervals))


def covers(intervals: Iterable[Interval], point: float) -> bool:
    """Whether ``point`` lies in at least one of the (closed) intervals."""
    return any(start <= point <= end for start, end in merge(intervals))
