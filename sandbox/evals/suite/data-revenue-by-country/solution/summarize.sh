#!/bin/bash
# Paid revenue per customer country: country,customers,orders,revenue.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: bash summarize.sh CUSTOMERS_CSV ORDERS_CSV" >&2
    exit 2
fi

exec python3 - "$1" "$2" <<'PY'
import csv
import sys
from collections import defaultdict
from decimal import Decimal

customers_path, orders_path = sys.argv[1:3]
with open(customers_path, newline="", encoding="utf-8") as handle:
    country_of = {row["id"]: row["country"] for row in csv.DictReader(handle)}

cents = defaultdict(int)
orders = defaultdict(int)
buyers = defaultdict(set)
with open(orders_path, newline="", encoding="utf-8") as handle:
    for row in csv.DictReader(handle):
        if row["status"].strip().lower() != "paid":
            continue
        country = country_of.get(row["customer_id"], "UNKNOWN")
        cents[country] += int(Decimal(row["amount"].strip()) * 100)
        orders[country] += 1
        buyers[country].add(row["customer_id"])

out = csv.writer(sys.stdout, lineterminator="\n")
out.writerow(["country", "customers", "orders", "revenue"])
for country in sorted(cents, key=lambda c: (-cents[c], c)):
    total = cents[country]
    out.writerow([country, len(buyers[country]), orders[country], f"{total // 100}.{total % 100:02d}"])
PY
