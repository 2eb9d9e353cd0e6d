import csv
import io
import os
import subprocess
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_shop import generate

WORK = Path(os.environ["WORK"])


def reference(customers_text, orders_text):
    country_of = {r["id"]: r["country"] for r in csv.DictReader(io.StringIO(customers_text))}
    revenue, count, buyers = defaultdict(Decimal), defaultdict(int), defaultdict(set)
    for row in csv.DictReader(io.StringIO(orders_text)):
        if row["status"].strip().lower() == "paid":
            country = country_of.get(row["customer_id"], "UNKNOWN")
            revenue[country] += Decimal(row["amount"])
            count[country] += 1
            buyers[country].add(row["customer_id"])
    lines = ["country,customers,orders,revenue"]
    for country in sorted(revenue, key=lambda c: (-revenue[c], c)):
        lines.append(f"{country},{len(buyers[country])},{count[country]},{revenue[country]:.2f}")
    return "".join(line + "\n" for line in lines)


def summarize(tmp_path, customers, orders):
    (tmp_path / "c.csv").write_text(customers)
    (tmp_path / "o.csv").write_text(orders)
    return subprocess.run(
        ["bash", str(WORK / "summarize.sh"), str(tmp_path / "c.csv"), str(tmp_path / "o.csv")],
        capture_output=True,
        text=True,
        cwd=WORK,
        timeout=30,
    )


def test_summary_file_matches_the_data():
    customers = (WORK / "data" / "customers.csv").read_text()
    orders = (WORK / "data" / "orders.csv").read_text()
    assert (WORK / "summary.csv").read_text() == reference(customers, orders)


@pytest.mark.parametrize(("seed", "customers", "orders"), [(1, 5, 30), (2, 60, 500), (3, 15, 0)])
def test_script_on_other_exports(tmp_path, seed, customers, orders):
    customer_text, order_text = generate(seed, customers, orders)
    result = summarize(tmp_path, customer_text, order_text)
    assert result.returncode == 0, result.stderr
    assert result.stdout == reference(customer_text, order_text)


def test_quoting_ties_and_unknown_customers(tmp_path):
    customers = (
        "id,name,country\n"
        'C1,"Doe, Jane",DE\n'
        'C2,"Line\nBreak, Name",FR\n'
        'C3,"Say ""hi"", Bob","AT"\n'
        "C4,Plain,DE\n"
    )
    orders = (
        "order_id,customer_id,amount,status\n"
        "1,C1,10.5,Paid\n"
        "2,C2,10.50,paid \n"
        "3,C3,3.25,PAID\n"
        "4,C3,0.25,paid\n"
        "5,C4,99.99,refunded\n"
        "6,C9,7,paid\n"
        "7,C1,0.01,unpaid\n"
        '8,C4,"1.00",paid\n'
    )
    result = summarize(tmp_path, customers, orders)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "country,customers,orders,revenue\n"
        "DE,2,2,11.50\n"
        "FR,1,1,10.50\n"
        "UNKNOWN,1,1,7.00\n"
        "AT,1,2,3.50\n"
    )
