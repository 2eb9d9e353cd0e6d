import datetime
import json

import pytest
from checkout.__main__ import main
from checkout.cart import Line
from checkout.catalog import Product
from checkout.discounts import DiscountError, find, load_discounts
from checkout.pricing import price

CATALOG = {
    "A": Product("A", "Apple", 120, "food"),
    "K": Product("K", "Knife", 2599, "hardware"),
}
TODAY = datetime.date(2024, 5, 1)


@pytest.fixture
def codes(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(
        json.dumps(
            {
                "Half": {"kind": "percent", "value": 50, "categories": ["food"]},
                "BIG": {"kind": "fixed", "value": 9999},
                "OLD": {"kind": "fixed", "value": 1, "expires": "2024-04-30"},
                "MIN": {"kind": "fixed", "value": 100, "min_subtotal_cents": 5000},
            }
        )
    )
    return load_discounts(path)


def test_percent_on_a_category(codes):
    quote = price([Line("A", 3), Line("K", 1)], CATALOG, "NY", find(codes, "half"), TODAY)
    assert quote.discount_cents == 180
    assert quote.tax_cents == 111  # (2959 - 180) * 4% = 111.16
    assert quote.total_cents == 2959 - 180 + 111


def test_fixed_is_capped(codes):
    quote = price([Line("A", 1)], CATALOG, "OR", find(codes, "BIG"), TODAY)
    assert (quote.discount_cents, quote.total_cents) == (120, 0)


def test_refusals(codes):
    with pytest.raises(DiscountError):
        find(codes, "nope")
    with pytest.raises(DiscountError):
        price([Line("A", 1)], CATALOG, "OR", find(codes, "OLD"), TODAY)
    with pytest.raises(DiscountError):
        price([Line("K", 1)], CATALOG, "OR", find(codes, "MIN"), TODAY)


def test_cli_receipt_with_a_code(capsys):
    args = ["examples/cart.json", "--region", "CA", "--code", "spring10", "--today", "2024-05-01"]
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines()[-4:] == [
        "Subtotal                           57.23",
        "Discount (SPRING10)                -5.72",
        "Tax 7.25%                           3.73",
        "TOTAL                              55.24",
    ]
