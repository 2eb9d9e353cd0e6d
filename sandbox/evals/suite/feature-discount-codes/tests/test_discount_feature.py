import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

WORK = Path(os.environ["WORK"])
TAX_BP = {"CA": 725, "NY": 400, "TX": 625, "OR": 0}
CATALOG = {
    "W-1": {"name": "Widget", "price_cents": 999, "category": "hardware"},
    "G-7": {"name": "Gadget deluxe", "price_cents": 12000, "category": "hardware"},
    "B-3": {"name": "Book of knots", "price_cents": 1550, "category": "books"},
    "T-9": {"name": "Tea sampler", "price_cents": 725, "category": "food"},
    "P-2": {"name": "Pen", "price_cents": 5, "category": "office"},
}
CODES = {
    "SAVE15": {"kind": "percent", "value": 15},
    "Books3": {"kind": "percent", "value": 33, "categories": ["books"]},
    "HARDFOOD": {"kind": "percent", "value": 7, "categories": ["hardware", "food"]},
    "TENNER": {"kind": "fixed", "value": 1000},
    "BIGSPEND": {"kind": "fixed", "value": 2500, "min_subtotal_cents": 20000},
    "OFFICE": {"kind": "fixed", "value": 300, "categories": ["office"]},
    "SUMMER": {"kind": "percent", "value": 20, "expires": "2024-08-31"},
    "ALL": {"kind": "percent", "value": 100},
}


def fmt(cents):
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


def half_up(numerator, denominator):
    return (2 * numerator + denominator) // (2 * denominator)


def receipt(cart, region, code=None):
    rows = [f"RECEIPT (region {region})"]
    subtotal = eligible = 0
    for sku, quantity in cart:
        product = CATALOG[sku]
        total = quantity * product["price_cents"]
        subtotal += total
        if code and product["category"] in CODES[code].get("categories", [product["category"]]):
            eligible += total
        label = f"{quantity} x {product['name']} ({sku})"
        rows.append(f"{label:<30}{fmt(total):>10}")
    rows.append("-" * 40)
    rows.append(f"{'Subtotal':<30}{fmt(subtotal):>10}")
    discount = 0
    if code:
        spec = CODES[code]
        if spec["kind"] == "percent":
            discount = half_up(eligible * spec["value"], 100)
        else:
            discount = min(spec["value"], eligible)
        rows.append(f"{f'Discount ({code})':<30}{'-' + fmt(discount):>10}")
    tax = half_up((subtotal - discount) * TAX_BP[region], 10_000)
    rows.append(f"{f'Tax {TAX_BP[region] / 100:.2f}%':<30}{fmt(tax):>10}")
    rows.append(f"{'TOTAL':<30}{fmt(subtotal - discount + tax):>10}")
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("shop")
    (root / "catalog.json").write_text(json.dumps(CATALOG))
    (root / "codes.json").write_text(json.dumps(CODES))
    return root


def checkout(files, cart, *args, cwd=None):
    path = files / f"cart-{abs(hash(tuple(cart)))}.json"
    path.write_text(json.dumps({"items": [{"sku": s, "quantity": q} for s, q in cart]}))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "checkout",
            str(path),
            "--catalog",
            str(files / "catalog.json"),
            *args,
        ],
        cwd=cwd or files,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(WORK)},
    )


def test_the_new_module_exists():
    assert (WORK / "checkout" / "discounts.py").is_file()


def test_receipts_without_a_code_are_unchanged(files):
    cart = [("W-1", 2), ("B-3", 1), ("T-9", 3)]
    for region in TAX_BP:
        result = checkout(files, cart, "--region", region)
        assert result.returncode == 0, result.stderr
        assert result.stdout == receipt(cart, region)


@pytest.mark.parametrize("seed", range(6))
def test_random_carts_and_codes(files, seed):
    rng = random.Random(seed)
    for _ in range(6):
        cart = [(sku, rng.randint(1, 4)) for sku in rng.sample(sorted(CATALOG), rng.randint(1, 5))]
        region = rng.choice(sorted(TAX_BP))
        code = rng.choice([c for c in CODES if c != "BIGSPEND"])
        spelled = rng.choice([code, code.lower(), code.upper()])
        args = ["--region", region, "--code", spelled, "--discounts", str(files / "codes.json")]
        result = checkout(files, cart, *args, "--today", "2024-08-31")
        assert result.returncode == 0, (cart, code, result.stderr)
        assert result.stdout == receipt(cart, region, code), (cart, region, code)


def test_minimum_subtotal(files):
    args = ["--region", "TX", "--code", "bigspend", "--discounts", str(files / "codes.json")]
    big = [("G-7", 1), ("W-1", 9)]
    result = checkout(files, big, *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout == receipt(big, "TX", "BIGSPEND")
    result = checkout(files, [("G-7", 1), ("W-1", 8)], *args)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.strip()


def test_expired_and_unknown_codes(files):
    common = ["--region", "CA", "--discounts", str(files / "codes.json")]
    cart = [("B-3", 2)]
    result = checkout(files, cart, *common, "--code", "SUMMER", "--today", "2024-09-01")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.strip()
    result = checkout(files, cart, *common, "--code", "NOPE", "--today", "2024-01-01")
    assert (result.returncode, result.stdout) == (2, "")
    result = checkout(files, cart, *common, "--code", "summer", "--today", "2024-01-01")
    assert result.stdout == receipt(cart, "CA", "SUMMER")


def test_zero_discount_is_still_shown_and_default_file_is_used(files, tmp_path):
    (tmp_path / "discounts.json").write_text(json.dumps(CODES))
    cart = [("W-1", 1)]
    result = checkout(files, cart, "--region", "NY", "--code", "office", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Discount (OFFICE)                  -0.00" in result.stdout
    assert result.stdout == receipt(cart, "NY", "OFFICE")


def test_the_example_discounts_file(files):
    cart = WORK / "examples" / "cart.json"
    result = subprocess.run(
        [sys.executable, "-m", "checkout", str(cart), "--region", "CA", "--code", "teatime"],
        cwd=WORK,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert "Discount (TEATIME)                -10.00" in result.stdout
    assert result.stdout.endswith("TOTAL                              50.65\n")
