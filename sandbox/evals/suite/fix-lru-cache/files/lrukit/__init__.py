"""A least-recently-used cache and a memoizing decorator."""

from .cache import LRUCache, memoize

__all__ = ["LRUCache", "memoize"]
