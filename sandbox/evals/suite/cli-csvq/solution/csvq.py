"""Query a CSV file: filter, sort, limit and select columns; write CSV or JSON."""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections.abc import Callable

NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")
CONDITION = re.compile(r"^(?P<column>.+?)(?P<op>!=|<=|>=|=|<|>)(?P<value>.*)$", re.DOTALL)
OPERATORS: dict[str, Callable[[object, object], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,  # type: ignore[operator]
    "<=": lambda a, b: a <= b,  # type: ignore[operator]
    ">": lambda a, b: a > b,  # type: ignore[operator]
    ">=": lambda a, b: a >= b,  # type: ignore[operator]
}


class QueryError(Exception):
    pass


def is_number(text: str) -> bool:
    return bool(NUMBER.match(text))


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def condition(text: str, header: list[str]) -> Callable[[dict[str, str]], bool]:
    match = CONDITION.match(text)
    if match is None:
        raise QueryError(f"malformed condition {text!r}: expected COLUMN OP VALUE")
    column, op, value = match.group("column"), match.group("op"), match.group("value")
    if column not in header:
        raise QueryError(f"unknown column {column!r} in --where")
    compare = OPERATORS[op]

    def holds(row: dict[str, str]) -> bool:
        cell = row[column]
        if is_number(cell) and is_number(value):
            return compare(float(cell), float(value))
        return compare(cell, value)

    return holds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file", nargs="?", default="-", metavar="FILE")
    parser.add_argument("--select", metavar="COLS")
    parser.add_argument("--where", action="append", default=[], metavar="COND")
    parser.add_argument("--sort", metavar="COL")
    parser.add_argument("--desc", action="store_true")
    parser.add_argument("--limit", type=non_negative, metavar="N")
    parser.add_argument("--format", choices=["csv", "json"], default="csv")
    args = parser.parse_args(argv)

    if args.file == "-":
        rows = list(csv.reader(sys.stdin))
    else:
        with open(args.file, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    records = [dict(zip(header, row, strict=False)) for row in body]

    try:
        tests = [condition(text, header) for text in args.where]
        columns = args.select.split(",") if args.select else header
        for column in [*columns, *([args.sort] if args.sort else [])]:
            if column not in header:
                raise QueryError(f"unknown column {column!r}")
    except QueryError as exc:
        print(f"csvq: error: {exc}", file=sys.stderr)
        return 2

    records = [r for r in records if all(test(r) for test in tests)]
    if args.sort:
        values = [r[args.sort] for r in records]
        if all(is_number(v) for v in values):
            records.sort(key=lambda r: float(r[args.sort]), reverse=args.desc)
        else:
            records.sort(key=lambda r: r[args.sort], reverse=args.desc)
    if args.limit is not None:
        records = records[: args.limit]

    selected = [{c: r.get(c, "") for c in columns} for r in records]
    if args.format == "json":
        json.dump(selected, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([r[c] for c in columns] for r in selected)
    return 0


if __name__ == "__main__":
    sys.exit(main())
