import os
import random
from pathlib import Path

import intervals
import pytest
from intervals import covers, merge, total_length


def reference_merge(items):
    out = []
    for start, end in sorted(items):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def random_intervals(rng, n):
    items = []
    for _ in range(n):
        start = rng.randint(-20, 40)
        items.append((start, start + rng.randint(0, 6)))
    return items


def test_package_comes_from_the_workspace():
    assert Path(intervals.__file__).resolve().is_relative_to(Path(os.environ["WORK"]))


@pytest.mark.parametrize("seed", range(40))
def test_merge_matches_reference(seed):
    rng = random.Random(seed)
    items = random_intervals(rng, rng.randint(0, 25))
    assert merge(items) == reference_merge(items)


@pytest.mark.parametrize("seed", range(20))
def test_total_length_and_covers_match_reference(seed):
    rng = random.Random(1000 + seed)
    items = random_intervals(rng, rng.randint(1, 15))
    expected = sum(e - s for s, e in reference_merge(items))
    assert total_length(items) == expected
    for point in range(-25, 50):
        assert covers(items, point) == any(s <= point <= e for s, e in items)


def test_chain_of_touching_intervals():
    assert merge([(3, 4), (1, 2), (2, 3), (4, 4)]) == [(1, 4)]


def test_floats_and_points():
    assert merge([(0.5, 1.5), (1.5, 2.0), (3.0, 3.0)]) == [(0.5, 2.0), (3.0, 3.0)]


def test_input_is_not_modified_and_generators_work():
    items = [(5, 6), (1, 5)]
    assert merge(items) == [(1, 6)]
    assert items == [(5, 6), (1, 5)]
    assert merge(iter([(2, 3), (0, 2)])) == [(0, 3)]
    assert merge([]) == []


def test_contained_intervals():
    assert merge([(1, 10), (2, 3), (4, 10)]) == [(1, 10)]
