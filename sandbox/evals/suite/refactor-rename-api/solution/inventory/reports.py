"""Stock reports."""

from __future__ import annotations

from .models import Item
from .store import Store


def low_stock(store: Store, threshold: int = 5) -> list[Item]:
    return [item for item in store if item.is_low(threshold)]


def inventory_value_cents(store: Store) -> int:
    return sum(item.value_cents() for item in store)


def format_report(store: Store, threshold: int = 5) -> str:
    lines = [f"{'SKU':<8}{'NAME':<20}{'QTY':>5}{'VALUE':>12}"]
    for item in store:
        flag = " LOW" if item.is_low(threshold) else ""
        value = item.value_cents()
        amount = f"{value // 100:>9}.{value % 100:02d}"
        lines.append(f"{item.sku:<8}{item.name:<20}{item.quantity:>5}{amount}{flag}")
    total = inventory_value_cents(store)
    lines.append(f"{'TOTAL':<33}{total // 100:>9}.{total % 100:02d}")
    return "\n".join(lines) + "\n"
