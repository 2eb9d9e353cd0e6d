"""A small stock-keeping package: items, a store, JSON import/export, reports and a CLI."""

from .models import Item
from .store import Store

__all__ = ["Item", "Store"]
