"""An in-memory store of items, keyed by SKU."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

from .models import Item


class Store:
    def __init__(self) -> None:
        self._items: dict[str, Item] = {}

    def add_item(self, item: Item) -> None:
        if item.sku in self._items:
            raise ValueError(f"duplicate SKU {item.sku}")
        self._items[item.sku] = item

    def get_item(self, sku: str) -> Item:
        try:
            return self._items[sku]
        except KeyError:
            raise KeyError(f"no item with SKU {sku}") from None

    def fetch_item(self, sku: str) -> Item:
        """Deprecated: use ``get_item``."""
        warnings.warn(
            "Store.fetch_item is deprecated; use Store.get_item", DeprecationWarning, stacklevel=2
        )
        return self.get_item(sku)

    def remove_item(self, sku: str) -> Item:
        item = self.get_item(sku)
        del self._items[sku]
        return item

    def restock(self, sku: str, amount: int) -> Item:
        if amount <= 0:
            raise ValueError("restock amount must be positive")
        item = self.get_item(sku)
        item.quantity += amount
        return item

    def sell(self, sku: str, amount: int) -> Item:
        item = self.get_item(sku)
        if amount > item.quantity:
            raise ValueError(f"only {item.quantity} of {sku} in stock")
        item.quantity -= amount
        return item

    def __iter__(self) -> Iterator[Item]:
        return iter(sorted(self._items.values(), key=lambda item: item.sku))

    def __len__(self) -> int:
        return len(self._items)
