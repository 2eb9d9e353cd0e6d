"""Deterministic sampling helpers for the report (no dependency on global state)."""


class Lcg:
    """A small linear congruential generator: the same seed gives the same numbers everywhere."""

    def __init__(self, seed: int) -> None:
        self.state = seed & 0xFFFFFFFF

    def next(self) -> int:
        self.state = (1103515245 * self.state + 12345) & 0x7FFFFFFF
        return self.state


def sample_rows(rows: list, k: int, seed: int) -> list:
    """k rows chosen without replacement, in their original order."""
    generator = Lcg(seed)
    chosen = set()
    k = min(k, len(rows))
    while len(chosen) < k:
        chosen.add(generator.next() % len(rows))
    return [row for index, row in enumerate(rows) if index in chosen]
