"""Closed numeric intervals: merging, union length and membership."""

from .core import covers, merge, total_length

__all__ = ["covers", "merge", "total_length"]
