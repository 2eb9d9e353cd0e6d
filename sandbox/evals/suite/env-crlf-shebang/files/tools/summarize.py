#!/usr/bin/env python
"""Per-region sales totals of a CSV with region,product,units,unit_price."""

import csv
import sys
from collections import defaultdict
from decimal import Decimal


def main(path):
    totals = defaultdict(Decimal)
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            totals[row["region"]] += int(row["units"]) * Decimal(row["unit_price"])
    for region, total in sorted(totals.items(), key=lambda item: (-item[1], item[0])):
        print(f"{region:<12}{total:>12.2f}")
    print(f"{'TOTAL':<12}{sum(totals.values(), Decimal()):>12.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
