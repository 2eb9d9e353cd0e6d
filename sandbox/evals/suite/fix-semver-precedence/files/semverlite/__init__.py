"""Semantic Versioning 2.0.0: parsing, precedence and ranges."""

from .ranges import satisfies
from .version import Version, parse

__all__ = ["Version", "parse", "satisfies"]
