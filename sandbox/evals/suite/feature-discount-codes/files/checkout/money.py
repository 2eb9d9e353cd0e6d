"""Money is an integer number of cents."""

from __future__ import annotations


def fmt(cents: int) -> str:
    """12345 -> '123.45', -5 -> '-0.05'."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"


def round_div(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded half up (both non-negative)."""
    return (2 * numerator + denominator) // (2 * denominator)
