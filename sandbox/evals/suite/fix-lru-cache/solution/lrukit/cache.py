"""LRUCache: a bounded mapping that forgets the least recently used entries first."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any

_MISSING = object()


class LRUCache:
    def __init__(
        self, capacity: int, on_evict: Callable[[Hashable, Any], None] | None = None
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._on_evict = on_evict
        # A dict keeps insertion order: the first key is the least recently used.
        self._data: dict[Hashable, Any] = {}

    def get(self, key: Hashable, default: Any = None) -> Any:
        value = self._data.pop(key, _MISSING)
        if value is _MISSING:
            self.misses += 1
            return default
        self.hits += 1
        self._data[key] = value
        return value

    def put(self, key: Hashable, value: Any) -> None:
        if key in self._data:
            del self._data[key]
        elif len(self._data) >= self.capacity:
            oldest = next(iter(self._data))
            evicted = self._data.pop(oldest)
            if self._on_evict is not None:
                self._on_evict(oldest, evicted)
        self._data[key] = value

    def keys(self) -> list[Hashable]:
        return list(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"LRUCache(capacity={self.capacity}, size={len(self)})"


def memoize(capacity: int = 128) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        cache = LRUCache(capacity)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = (args, tuple(sorted(kwargs.items())))
            result = cache.get(key, _MISSING)
            if result is _MISSING:
                result = function(*args, **kwargs)
                cache.put(key, result)
            return result

        wrapper.cache = cache  # type: ignore[attr-defined]
        return wrapper

    return decorate
