"""The product catalog: a JSON object of SKU -> {"name", "price_cents", "category"}."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    price_cents: int
    category: str


def load_catalog(path: str | Path) -> dict[str, Product]:
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    return {
        sku: Product(sku, entry["name"], int(entry["price_cents"]), entry["category"])
        for sku, entry in raw.items()
    }
