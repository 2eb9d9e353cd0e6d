"""The printed receipt."""

from __future__ import annotations

from .money import fmt
from .pricing import Quote

WIDTH = 40


def row(label: str, cents: int) -> str:
    return f"{label:<30}{fmt(cents):>10}"


def render(quote: Quote) -> str:
    out = [f"RECEIPT (region {quote.region})"]
    for line in quote.lines:
        out.append(row(f"{line.quantity} x {line.name} ({line.sku})", line.total_cents))
    out.append("-" * WIDTH)
    out.append(row("Subtotal", quote.subtotal_cents))
    if quote.discount_code is not None:
        discount = fmt(quote.discount_cents)
        out.append(f"{f'Discount ({quote.discount_code})':<30}{'-' + discount:>10}")
    out.append(row(f"Tax {quote.tax_bp / 100:.2f}%", quote.tax_cents))
    out.append(row("TOTAL", quote.total_cents))
    return "\n".join(out) + "\n"
