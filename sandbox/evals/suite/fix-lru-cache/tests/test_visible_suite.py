import pytest
from lrukit import LRUCache, memoize


def test_least_recently_inserted_is_evicted():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert "a" not in cache
    assert cache.keys() == ["b", "c"]


def test_get_refreshes_recency():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]


def test_replacing_a_value_does_not_evict():
    evicted = []
    cache = LRUCache(2, on_evict=lambda k, v: evicted.append((k, v)))
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    assert len(cache) == 2
    assert evicted == []
    assert cache.keys() == ["b", "a"]
    assert cache.get("a") == 10


def test_hits_and_misses():
    cache = LRUCache(1)
    cache.put("x", 0)
    cache.get("x")
    cache.get("y")
    assert (cache.hits, cache.misses) == (1, 1)


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        LRUCache(0)


def test_memoize_uses_keyword_arguments():
    @memoize()
    def power(base, exponent=2):
        return base**exponent

    assert power(3) == 9
    assert power(3, exponent=3) == 27


def test_memoize_caches_none():
    calls = []

    @memoize(capacity=4)
    def lookup(name):
        calls.append(name)
        return None

    lookup("a")
    lookup("a")
    assert calls == ["a"]
