"""Random customers and orders in the shipped format."""

import csv
import io
import random

COUNTRIES = ["DE", "FR", "US", "JP", "BR", "NZ"]
FIRST = ["Ana", "Ben", "Chloé", "Dev", "Eli", "Fatima", "Goro", "Hana"]
LAST = ["Smith", "O'Brien", "Müller", "Tanaka", "Silva", "Dupont"]


def generate(seed, n_customers, n_orders):
    rng = random.Random(seed)
    customers = io.StringIO()
    writer = csv.writer(customers, lineterminator="\n")
    writer.writerow(["id", "name", "country"])
    ids = []
    for i in range(n_customers):
        cid = f"C{100 + i * 7}"
        ids.append(cid)
        name = f"{rng.choice(LAST)}, {rng.choice(FIRST)}"
        if rng.random() < 0.2:
            name = f'{rng.choice(FIRST)} "{rng.choice(["The", "Big"])}" {rng.choice(LAST)}'
        writer.writerow([cid, name, rng.choice(COUNTRIES)])
    orders = io.StringIO()
    writer = csv.writer(orders, lineterminator="\n")
    writer.writerow(["order_id", "customer_id", "amount", "status"])
    for i in range(n_orders):
        cid = rng.choice(ids) if rng.random() < 0.93 else f"C{9000 + rng.randint(0, 5)}"
        amount = rng.choice(
            [f"{rng.randint(1, 500)}.{rng.randint(0, 99):02d}", str(rng.randint(1, 90))]
        )
        status = rng.choice(["paid", "paid", "PAID", " paid", "refunded", "pending", "cancelled"])
        writer.writerow([f"O{5000 + i}", cid, amount, status])
    return customers.getvalue(), orders.getvalue()
