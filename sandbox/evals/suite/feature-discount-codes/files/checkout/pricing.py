"""Totals: line totals, subtotal, sales tax by region."""

from __future__ import annotations

from dataclasses import dataclass

from .cart import Line
from .catalog import Product
from .money import round_div

# Sales tax in basis points (1/100 of a percent).
TAX_BP = {"CA": 725, "NY": 400, "TX": 625, "OR": 0}


class PricingError(Exception):
    pass


@dataclass(frozen=True)
class PricedLine:
    sku: str
    name: str
    quantity: int
    total_cents: int


@dataclass(frozen=True)
class Quote:
    region: str
    lines: list[PricedLine]
    subtotal_cents: int
    tax_bp: int
    tax_cents: int
    total_cents: int


def price(cart: list[Line], catalog: dict[str, Product], region: str) -> Quote:
    if region not in TAX_BP:
        raise PricingError(f"unknown region {region}")
    lines = []
    for line in cart:
        product = catalog.get(line.sku)
        if product is None:
            raise PricingError(f"unknown SKU {line.sku}")
        lines.append(
            PricedLine(line.sku, product.name, line.quantity, line.quantity * product.price_cents)
        )
    subtotal = sum(line.total_cents for line in lines)
    tax = round_div(subtotal * TAX_BP[region], 10_000)
    return Quote(region, lines, subtotal, TAX_BP[region], tax, subtotal + tax)
