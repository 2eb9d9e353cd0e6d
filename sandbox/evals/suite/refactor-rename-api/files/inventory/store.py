"""An in-memory store of items, keyed by SKU."""

from __future__ import annotations

from collections.abc import Iterator

from .models import Item


class Store:
    def __init__(self) -> None:
        self._items: dict[str, Item] = {}

    def add_item(self, item: Item) -> None:
        if item.sku in self._items:
            raise ValueError(f"duplicate SKU {item.sku}")
        self._items[item.sku] = item

    def fetch_item(self, sku: str) -> Item:
        try:
            return self._items[sku]
        except KeyError:
            raise KeyError(f"no item with SKU {sku}") from None

    def remove_item(self, sku: str) -> Item:
        item = self.fetch_item(sku)
        del self._items[sku]
        return item

    def restock(self, sku: str, amount: int) -> Item:
        if amount <= 0:
            raise ValueError("restock amount must be positive")
        item = self.fetch_item(sku)
        item.qty += amount
        return item

    def sell(self, sku: str, amount: int) -> Item:
        item = self.fetch_item(sku)
        if amount > item.qty:
            raise ValueError(f"only {item.qty} of {sku} in stock")
        item.qty -= amount
        return item

    def __iter__(self) -> Iterator[Item]:
        return iter(sorted(self._items.values(), key=lambda item: item.sku))

    def __len__(self) -> int:
        return len(self._items)
