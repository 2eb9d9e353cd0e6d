"""The data model."""

from __future__ import annotations

import warnings
from dataclasses import dataclass


@dataclass
class Item:
    sku: str
    name: str
    quantity: int
    price_cents: int

    def value_cents(self) -> int:
        return self.quantity * self.price_cents

    def is_low(self, threshold: int) -> bool:
        return self.quantity <= threshold

    @property
    def qty(self) -> int:
        """Deprecated: use ``quantity``."""
        warnings.warn("Item.qty is deprecated; use Item.quantity", DeprecationWarning, stacklevel=2)
        return self.quantity

    @qty.setter
    def qty(self, value: int) -> None:
        warnings.warn("Item.qty is deprecated; use Item.quantity", DeprecationWarning, stacklevel=2)
        self.quantity = value
