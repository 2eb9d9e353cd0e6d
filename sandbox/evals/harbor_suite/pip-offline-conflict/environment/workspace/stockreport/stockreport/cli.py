"""stockreport FILE.csv: a table of items with their stock, heaviest first."""

import csv
import sys

import tabfmt
import unitconv


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: stockreport FILE.csv")
    with open(args[0], newline="") as f:
        stock = [
            (r["item"], unitconv.to_grams(float(r["amount"]), r["unit"])) for r in csv.DictReader(f)
        ]
    stock.sort(key=lambda item: (-item[1], item[0]))
    rows = [("item", "stock")] + [(name, unitconv.human(grams)) for name, grams in stock]
    print(tabfmt.render(rows, align="lr"))
