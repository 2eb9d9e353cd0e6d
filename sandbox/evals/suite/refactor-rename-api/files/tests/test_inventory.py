import json

import pytest
from inventory import Item, Store
from inventory.cli import main
from inventory.importer import dump_json, load_json
from inventory.reports import format_report, inventory_value_cents, low_stock


@pytest.fixture
def store():
    store = Store()
    store.add_item(Item("X-1", "Widget", 3, 250))
    store.add_item(Item("Y-2", "Gadget", 10, 1000))
    return store


def test_fetch_and_restock(store):
    assert store.fetch_item("X-1").qty == 3
    store.restock("X-1", 7)
    assert store.fetch_item("X-1").qty == 10
    with pytest.raises(KeyError):
        store.fetch_item("nope")


def test_sell_checks_stock(store):
    store.sell("Y-2", 4)
    assert store.fetch_item("Y-2").qty == 6
    with pytest.raises(ValueError):
        store.sell("Y-2", 7)


def test_reports(store):
    assert [i.sku for i in low_stock(store, 5)] == ["X-1"]
    assert inventory_value_cents(store) == 3 * 250 + 10 * 1000
    assert "X-1" in format_report(store)


def test_json_round_trip(store, tmp_path):
    path = tmp_path / "stock.json"
    dump_json(store, path)
    assert json.loads(path.read_text())[0] == {
        "sku": "X-1",
        "name": "Widget",
        "qty": 3,
        "price_cents": 250,
    }
    assert load_json(path).fetch_item("Y-2").qty == 10


def test_cli_show(tmp_path, capsys):
    path = tmp_path / "stock.json"
    path.write_text('[{"sku": "Z", "name": "Zip", "qty": 2, "price_cents": 5}]')
    assert main([str(path), "show", "Z"]) == 0
    assert capsys.readouterr().out == "Z Zip: 2 in stock at 5 cents\n"
