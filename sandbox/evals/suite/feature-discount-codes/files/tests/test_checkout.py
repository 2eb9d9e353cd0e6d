from checkout.__main__ import main
from checkout.cart import Line
from checkout.catalog import Product
from checkout.money import fmt, round_div
from checkout.pricing import price
from checkout.receipt import render

CATALOG = {
    "A": Product("A", "Apple", 120, "food"),
    "K": Product("K", "Knife", 2599, "hardware"),
}


def test_money():
    assert fmt(12345) == "123.45"
    assert fmt(-5) == "-0.05"
    assert round_div(5, 10) == 1
    assert round_div(4, 10) == 0


def test_price_and_tax():
    quote = price([Line("A", 3), Line("K", 1)], CATALOG, "CA")
    assert quote.subtotal_cents == 2959
    assert quote.tax_cents == 215  # 2959 * 7.25% = 214.5275
    assert quote.total_cents == 3174


def test_receipt():
    quote = price([Line("A", 3)], CATALOG, "NY")
    assert render(quote) == (
        "RECEIPT (region NY)\n"
        "3 x Apple (A)                       3.60\n"
        "----------------------------------------\n"
        "Subtotal                            3.60\n"
        "Tax 4.00%                           0.14\n"
        "TOTAL                               3.74\n"
    )


def test_cli(capsys):
    assert main(["examples/cart.json", "--catalog", "catalog.json", "--region", "OR"]) == 0
    assert capsys.readouterr().out.endswith("TOTAL                              57.23\n")
