import os
import random
from collections import OrderedDict
from pathlib import Path

import lrukit
import pytest
from lrukit import LRUCache, memoize


class Model:
    """The documented behaviour, on an OrderedDict."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.data = OrderedDict()
        self.hits = self.misses = 0
        self.evicted = []

    def get(self, key, default=None):
        if key in self.data:
            self.hits += 1
            self.data.move_to_end(key)
            return self.data[key]
        self.misses += 1
        return default

    def put(self, key, value):
        if key in self.data:
            self.data.move_to_end(key)
        elif len(self.data) >= self.capacity:
            self.evicted.append(self.data.popitem(last=False))
        self.data[key] = value


def test_package_comes_from_the_workspace():
    assert Path(lrukit.__file__).resolve().is_relative_to(Path(os.environ["WORK"]))


@pytest.mark.parametrize("seed", range(30))
def test_random_operations_match_the_model(seed):
    rng = random.Random(seed)
    capacity = rng.randint(1, 6)
    evicted = []
    cache = LRUCache(capacity, on_evict=lambda k, v: evicted.append((k, v)))
    model = Model(capacity)
    for step in range(300):
        key = rng.randint(0, 9)
        operation = rng.random()
        if operation < 0.45:
            assert cache.get(key, "missing") == model.get(key, "missing"), step
        elif operation < 0.9:
            cache.put(key, step)
            model.put(key, step)
        else:
            assert (key in cache) == (key in model.data)
        assert cache.keys() == list(model.data), step
        assert len(cache) == len(model.data)
    assert evicted == model.evicted
    assert (cache.hits, cache.misses) == (model.hits, model.misses)


def test_contains_and_len_do_not_refresh():
    cache = LRUCache(2)
    cache.put(1, "one")
    cache.put(2, "two")
    assert 1 in cache
    assert len(cache) == 2
    cache.put(3, "three")
    assert cache.keys() == [2, 3]


def test_falsy_values_are_cached_values():
    cache = LRUCache(3)
    cache.put("zero", 0)
    cache.put("none", None)
    assert cache.get("zero", "d") == 0
    assert cache.get("none", "d") is None
    assert cache.hits == 2


def test_memoize_distinguishes_keyword_values_and_counts_calls():
    calls = []

    @memoize(capacity=8)
    def scaled(x, *, factor=1, offset=0):
        calls.append((x, factor, offset))
        return x * factor + offset

    assert scaled(2) == 2
    assert scaled(2, factor=3) == 6
    assert scaled(2, factor=3, offset=1) == 7
    assert scaled(2, offset=1, factor=3) == 7
    assert scaled(2, factor=3) == 6
    assert scaled(2) == 2
    assert len(calls) == 3
    assert scaled.__name__ == "scaled"
    assert isinstance(scaled.cache, LRUCache)


def test_memoize_evicts_least_recently_used_results():
    calls = []

    @memoize(capacity=2)
    def square(x):
        calls.append(x)
        return x * x

    for x in [1, 2, 1, 3, 1, 2]:
        square(x)
    assert calls == [1, 2, 3, 2]


def test_memoize_caches_none_and_false():
    calls = []

    @memoize()
    def check(x):
        calls.append(x)
        return None if x else False

    for x in [1, 0, 1, 0]:
        check(x)
    assert calls == [1, 0]
