"""A cart: a JSON object {"items": [{"sku": ..., "quantity": ...}, ...]}."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Line:
    sku: str
    quantity: int


def load_cart(path: str | Path) -> list[Line]:
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    lines = [Line(item["sku"], int(item["quantity"])) for item in raw["items"]]
    if any(line.quantity <= 0 for line in lines):
        raise ValueError("quantities must be positive")
    return lines
