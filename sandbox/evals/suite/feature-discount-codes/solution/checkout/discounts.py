"""Discount codes: a JSON object of CODE -> {"kind", "value", and optional conditions}."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path

from .cart import Line
from .catalog import Product
from .money import fmt, round_div


class DiscountError(Exception):
    pass


@dataclass(frozen=True)
class Discount:
    code: str
    kind: str
    value: int
    categories: frozenset[str] | None = None
    min_subtotal_cents: int = 0
    expires: datetime.date | None = None

    def eligible_cents(self, cart: list[Line], catalog: dict[str, Product]) -> int:
        return sum(
            line.quantity * catalog[line.sku].price_cents
            for line in cart
            if self.categories is None or catalog[line.sku].category in self.categories
        )

    def check(self, subtotal_cents: int, today: datetime.date) -> None:
        if self.expires is not None and today > self.expires:
            raise DiscountError(f"discount code {self.code} expired on {self.expires}")
        if subtotal_cents < self.min_subtotal_cents:
            raise DiscountError(
                f"discount code {self.code} needs a subtotal of at least "
                f"{fmt(self.min_subtotal_cents)}"
            )

    def amount_cents(self, eligible_cents: int) -> int:
        if self.kind == "percent":
            return round_div(eligible_cents * self.value, 100)
        return min(self.value, eligible_cents)


def load_discounts(path: str | Path) -> dict[str, Discount]:
    """Codes by their upper-case spelling; each keeps its own spelling for receipts."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    discounts = {}
    for code, entry in raw.items():
        if entry["kind"] not in ("percent", "fixed"):
            raise DiscountError(f"discount code {code}: unknown kind {entry['kind']!r}")
        expires = entry.get("expires")
        categories = entry.get("categories")
        discounts[code.upper()] = Discount(
            code=code,
            kind=entry["kind"],
            value=int(entry["value"]),
            categories=frozenset(categories) if categories is not None else None,
            min_subtotal_cents=int(entry.get("min_subtotal_cents", 0)),
            expires=datetime.date.fromisoformat(expires) if expires else None,
        )
    return discounts


def find(discounts: dict[str, Discount], code: str) -> Discount:
    try:
        return discounts[code.upper()]
    except KeyError:
        raise DiscountError(f"unknown discount code {code}") from None
