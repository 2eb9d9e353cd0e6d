import ast
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import inventory
import pytest
from inventory import Item, Store
from inventory.importer import dump_json, load_json
from inventory.reports import format_report, inventory_value_cents, low_stock

WORK = Path(os.environ["WORK"])
STOCK = [
    {"sku": "A-100", "name": "Anchor bolt", "qty": 120, "price_cents": 35},
    {"sku": "B-220", "name": "Bracket", "qty": 4, "price_cents": 1250},
    {"sku": "C-310", "name": "Cable tie (100)", "qty": 0, "price_cents": 499},
]


@pytest.fixture(autouse=True)
def deprecations_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        yield


def test_package_comes_from_the_workspace():
    assert Path(inventory.__file__).resolve().is_relative_to(WORK)


def test_item_fields():
    assert [f.name for f in dataclasses.fields(Item)] == ["sku", "name", "quantity", "price_cents"]
    item = Item("S", "Screw", 7, 20)
    assert item.quantity == 7
    assert Item(sku="S", name="Screw", quantity=7, price_cents=20) == item
    assert item.value_cents() == 140


def test_store_get_item():
    store = Store()
    store.add_item(Item("S", "Screw", 7, 20))
    assert store.get_item("S").quantity == 7
    assert store.restock("S", 3).quantity == 10
    assert store.sell("S", 4).quantity == 6
    with pytest.raises(ValueError):
        store.sell("S", 7)
    assert store.remove_item("S").sku == "S"
    with pytest.raises(KeyError):
        store.get_item("S")


def test_deprecated_fetch_item_warns_and_works():
    store = Store()
    store.add_item(Item("S", "Screw", 7, 20))
    with pytest.warns(DeprecationWarning):
        assert store.fetch_item("S") is store.get_item("S")
    with pytest.warns(DeprecationWarning), pytest.raises(KeyError):
        store.fetch_item("missing")


def test_deprecated_qty_warns_on_read_and_write():
    item = Item("S", "Screw", 7, 20)
    with pytest.warns(DeprecationWarning):
        assert item.qty == 7
    with pytest.warns(DeprecationWarning):
        item.qty = 9
    assert item.quantity == 9


def test_json_format_keeps_qty(tmp_path):
    source = tmp_path / "in.json"
    source.write_text(json.dumps(STOCK))
    store = load_json(source)
    assert store.get_item("A-100").quantity == 120
    store.restock("B-220", 6)
    target = tmp_path / "out.json"
    dump_json(store, target)
    saved = json.loads(target.read_text())
    assert saved[1] == {"sku": "B-220", "name": "Bracket", "qty": 10, "price_cents": 1250}
    assert all("quantity" not in entry for entry in saved)


def test_reports_are_unchanged(tmp_path):
    source = tmp_path / "in.json"
    source.write_text(json.dumps(STOCK))
    store = load_json(source)
    assert [i.sku for i in low_stock(store, 4)] == ["B-220", "C-310"]
    assert inventory_value_cents(store) == 120 * 35 + 4 * 1250
    assert format_report(store) == (
        "SKU     NAME                  QTY       VALUE\n"
        "A-100   Anchor bolt           120       42.00\n"
        "B-220   Bracket                 4       50.00 LOW\n"
        "C-310   Cable tie (100)         0        0.00 LOW\n"
        "TOTAL                                   92.00\n"
    )


def cli(tmp_path, *args):
    return subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-m", "inventory.cli", *args],
        cwd=WORK,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_cli_without_deprecated_names(tmp_path):
    path = tmp_path / "stock.json"
    path.write_text(json.dumps(STOCK))
    result = cli(tmp_path, str(path), "show", "B-220")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "B-220 Bracket: 4 in stock at 1250 cents\n"
    result = cli(tmp_path, str(path), "restock", "C-310", "5")
    assert (result.returncode, result.stdout) == (0, "C-310: 5 in stock\n"), result.stderr
    result = cli(tmp_path, str(path), "sell", "C-310", "2")
    assert (result.returncode, result.stdout) == (0, "C-310: 3 in stock\n"), result.stderr
    assert json.loads(path.read_text())[2]["qty"] == 3
    result = cli(tmp_path, str(path), "report", "--threshold", "3")
    assert result.returncode == 0, result.stderr
    assert "C-310   Cable tie (100)         3       14.97 LOW" in result.stdout
    result = cli(tmp_path, str(path), "show", "nope")
    assert result.returncode == 1


def test_package_code_no_longer_uses_the_old_names():
    offenders = []
    for path in sorted((WORK / "inventory").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("qty", "fetch_item"):
                offenders.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert offenders == []


def test_the_visible_tests_pass_on_a_clean_copy(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(WORK, copy, ignore=shutil.ignore_patterns("__pycache__", "conftest.py"))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert " passed" in result.stdout
    source = (copy / "tests" / "test_inventory.py").read_text()
    assert "get_item" in source and ".quantity" in source
