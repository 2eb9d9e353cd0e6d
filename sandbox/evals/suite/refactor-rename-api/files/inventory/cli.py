"""python3 -m inventory.cli FILE show SKU | restock SKU N | sell SKU N | report [--threshold N]"""

from __future__ import annotations

import argparse
import sys

from .importer import dump_json, load_json
from .reports import format_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="inventory")
    parser.add_argument("file")
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show")
    show.add_argument("sku")
    for name in ("restock", "sell"):
        change = commands.add_parser(name)
        change.add_argument("sku")
        change.add_argument("amount", type=int)
    report = commands.add_parser("report")
    report.add_argument("--threshold", type=int, default=5)
    args = parser.parse_args(argv)

    store = load_json(args.file)
    try:
        if args.command == "show":
            item = store.fetch_item(args.sku)
            print(f"{item.sku} {item.name}: {item.qty} in stock at {item.price_cents} cents")
        elif args.command in ("restock", "sell"):
            change = store.restock if args.command == "restock" else store.sell
            item = change(args.sku, args.amount)
            dump_json(store, args.file)
            print(f"{item.sku}: {item.qty} in stock")
        else:
            print(format_report(store, args.threshold), end="")
    except (KeyError, ValueError) as exc:
        print(f"inventory: {exc.args[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
