"""A to-do list for the terminal, kept in a JSON file."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

PRIORITIES = {"high": 0, "normal": 1, "low": 2}


def due_date(text: str) -> str:
    try:
        parsed = datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None
    if parsed.isoformat() != text:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}")
    return text


def load(path: Path) -> dict:
    if not path.exists():
        return {"next_id": 1, "items": []}
    return json.loads(path.read_text(encoding="utf-8"))


def save(path: Path, db: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".todo-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(db, handle, indent=2, ensure_ascii=False)
    os.replace(tmp, path)


def find(db: dict, item_id: int) -> dict | None:
    return next((item for item in db["items"] if item["id"] == item_id), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="todo", description=__doc__)
    parser.add_argument("--db", type=Path, help="the JSON file (default: $TODO_DB or todo.json)")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="add an item")
    add.add_argument("text")
    add.add_argument("--priority", choices=list(PRIORITIES), default="normal")
    add.add_argument("--due", type=due_date)
    listing = commands.add_parser("list", help="show items")
    listing.add_argument("--all", action="store_true")
    for name in ("done", "rm"):
        command = commands.add_parser(name)
        command.add_argument("id", type=int)
    args = parser.parse_args(argv)

    path = args.db or Path(os.environ.get("TODO_DB") or "todo.json")
    db = load(path)
    if args.command == "add":
        item = {
            "id": db["next_id"],
            "text": args.text,
            "priority": args.priority,
            "due": args.due,
            "done": False,
        }
        db["items"].append(item)
        db["next_id"] += 1
        save(path, db)
        print(f"added {item['id']}")
    elif args.command == "list":
        shown = [item for item in db["items"] if args.all or not item["done"]]
        shown.sort(
            key=lambda i: (PRIORITIES[i["priority"]], i["due"] is None, i["due"] or "", i["id"])
        )
        for i in shown:
            mark = "x" if i["done"] else " "
            print(f"{i['id']:>3} [{mark}] {i['priority']:<6} {i['due'] or '-':<10} {i['text']}")
    else:
        item = find(db, args.id)
        if item is None:
            print(f"todo: no item {args.id}", file=sys.stderr)
            return 1
        if args.command == "done":
            item["done"] = True
            print(f"done {args.id}")
        else:
            db["items"].remove(item)
            print(f"removed {args.id}")
        save(path, db)
    return 0


if __name__ == "__main__":
    sys.exit(main())
