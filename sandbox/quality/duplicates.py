"""Near-duplicate tasks and problems: normalised text and test fingerprints.

Two items of the same kind are duplicates when their tests have the same
fingerprint (the tests with comments, whitespace and case taken out), or when
their texts (a task's instruction, a problem's description) are alike: the
Jaccard similarity of their word 3-shingles is at least the threshold.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations
from typing import Final

__all__ = ["Fingerprint", "find_duplicates", "fingerprint"]

COMMENT_RE: Final = re.compile(r"(?m)(#|//).*$")
WORD_RE: Final = re.compile(r"[a-z0-9]+")
MIN_WORDS: Final = 6


@dataclass(frozen=True)
class Fingerprint:
    """What duplicates are found by: one item's shingles and tests digest."""

    key: str
    kind: str
    """Only items of one kind are compared (a problem's kind names its language)."""
    shingles: frozenset[str]
    tests_digest: str


def fingerprint(key: str, kind: str, text: str, tests: Iterable[str]) -> Fingerprint:
    """The fingerprint of an item from its text and its tests' contents."""
    words = WORD_RE.findall(text.lower())
    shingles = frozenset(" ".join(words[i : i + 3]) for i in range(max(len(words) - 2, 0)))
    if len(words) < MIN_WORDS:
        shingles = frozenset()  # too short to tell a duplicate from a coincidence
    normalised = sorted("".join(COMMENT_RE.sub("", test).lower().split()) for test in tests)
    digest = hashlib.sha256("\0".join(normalised).encode()).hexdigest() if normalised else ""
    return Fingerprint(key, kind, shingles, digest)


def find_duplicates(
    prints: Iterable[Fingerprint], threshold: float
) -> list[tuple[str, str, str, float]]:
    """``(key, other key, why, text similarity)`` for every pair of near-duplicates."""
    pairs = []
    for a, b in combinations(list(prints), 2):
        if a.kind != b.kind:
            continue
        union = a.shingles | b.shingles
        similarity = len(a.shingles & b.shingles) / len(union) if union else 0.0
        if a.tests_digest and a.tests_digest == b.tests_digest:
            pairs.append((a.key, b.key, "the same tests (after normalising)", similarity))
        elif similarity >= threshold:
            pairs.append((a.key, b.key, f"texts {similarity:.0%} alike", similarity))
    return pairs
