"""python3 -m checkout CART --catalog CATALOG --region REGION"""

from __future__ import annotations

import argparse
import sys

from .cart import load_cart
from .catalog import load_catalog
from .pricing import PricingError, price
from .receipt import render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="checkout")
    parser.add_argument("cart")
    parser.add_argument("--catalog", default="catalog.json")
    parser.add_argument("--region", required=True)
    args = parser.parse_args(argv)
    try:
        quote = price(load_cart(args.cart), load_catalog(args.catalog), args.region)
    except (PricingError, ValueError) as exc:
        print(f"checkout: {exc}", file=sys.stderr)
        return 2
    print(render(quote), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
