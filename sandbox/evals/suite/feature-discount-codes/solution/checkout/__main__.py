"""python3 -m checkout CART --catalog CATALOG --region REGION [--code CODE [--discounts FILE]]"""

from __future__ import annotations

import argparse
import datetime
import sys

from .cart import load_cart
from .catalog import load_catalog
from .discounts import DiscountError, find, load_discounts
from .pricing import PricingError, price
from .receipt import render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="checkout")
    parser.add_argument("cart")
    parser.add_argument("--catalog", default="catalog.json")
    parser.add_argument("--region", required=True)
    parser.add_argument("--code", help="a discount code")
    parser.add_argument("--discounts", default="discounts.json", help="the discount codes file")
    parser.add_argument(
        "--today", type=datetime.date.fromisoformat, help="the date for expiry (default: today)"
    )
    args = parser.parse_args(argv)
    try:
        discount = find(load_discounts(args.discounts), args.code) if args.code else None
        quote = price(
            load_cart(args.cart), load_catalog(args.catalog), args.region, discount, args.today
        )
    except (PricingError, DiscountError, ValueError, OSError) as exc:
        print(f"checkout: {exc}", file=sys.stderr)
        return 2
    print(render(quote), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
