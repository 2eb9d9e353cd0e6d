"""JSON files of items: a list of {"sku", "name", "qty", "price_cents"} objects.

The file format keeps the "qty" key; in Python the field is ``Item.quantity``.
"""

from __future__ import annotations

import json
from pathlib import Path

from .models import Item
from .store import Store


def load_json(path: str | Path) -> Store:
    store = Store()
    for raw in json.loads(Path(path).read_text(encoding="utf-8")):
        store.add_item(Item(raw["sku"], raw["name"], int(raw["qty"]), int(raw["price_cents"])))
    return store


def dump_json(store: Store, path: str | Path) -> None:
    data = [
        {"sku": i.sku, "name": i.name, "qty": i.quantity, "price_cents": i.price_cents}
        for i in store
    ]
    Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
