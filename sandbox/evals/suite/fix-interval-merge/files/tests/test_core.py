import pytest
from intervals import covers, merge, total_length


def test_disjoint_intervals_are_kept_and_sorted():
    assert merge([(8, 10), (1, 3)]) == [(1, 3), (8, 10)]


def test_overlapping_intervals_merge():
    assert merge([(1, 3), (2, 6), (8, 10), (15, 18)]) == [(1, 6), (8, 10), (15, 18)]


def test_touching_intervals_merge():
    assert merge([(1, 4), (4, 5)]) == [(1, 5)]


def test_total_length_counts_shared_points_once():
    assert total_length([(0, 2), (2, 3), (10, 11)]) == 4


def test_covers():
    assert covers([(0, 1), (5, 6)], 5.5)
    assert not covers([(0, 1), (5, 6)], 3)


def test_reversed_interval_is_refused():
    with pytest.raises(ValueError):
        merge([(3, 1)])
