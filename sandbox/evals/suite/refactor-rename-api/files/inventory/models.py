"""The data model."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Item:
    sku: str
    name: str
    qty: int
    price_cents: int

    def value_cents(self) -> int:
        return self.qty * self.price_cents

    def is_low(self, threshold: int) -> bool:
        return self.qty <= threshold
