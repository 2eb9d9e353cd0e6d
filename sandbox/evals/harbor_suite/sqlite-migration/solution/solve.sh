#!/bin/bash
# Reference fix: migrations sorted by number, each run inside one transaction
# together with its user_version bump (SQLite's DDL is transactional); the
# NOT NULL email column gets a default so existing rows can take it; the
# leftover of the failed run (the empty audit table) is dropped before
# migrating app.db.
set -euo pipefail
cd /workspace/app
cat > migrate.py <<'PY'
"""migrate.py DB: applies the pending migrations in migrations/ to the SQLite file DB.

A migration is migrations/<N>_<name>.sql; they run in numeric order, each in
one transaction with its version: the database's PRAGMA user_version is the
number of the last migration applied. A failing migration is rolled back
entirely and the tool exits non-zero.
"""

import sqlite3
import sys
from pathlib import Path

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def pending(current: int) -> list[tuple[int, Path]]:
    found = sorted((int(p.name.split("_", 1)[0]), p) for p in MIGRATIONS.glob("*.sql"))
    return [(v, p) for v, p in found if v > current]


def main() -> None:
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    for version, path in pending(current):
        print(f"applying {path.name}")
        try:
            conn.executescript(
                f"BEGIN;\n{path.read_text()}\n;PRAGMA user_version = {version};\nCOMMIT;"
            )
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.rollback()
            sys.exit(f"migrate.py: {path.name} failed and was rolled back: {exc}")
    conn.close()


if __name__ == "__main__":
    main()
PY
sed -i "s/ALTER TABLE users ADD COLUMN email TEXT NOT NULL;/ALTER TABLE users ADD COLUMN email TEXT NOT NULL DEFAULT '';/" migrations/2_user_email.sql
python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("DROP TABLE IF EXISTS audit"); c.commit()' app.db
python3 migrate.py app.db
python3 migrate.py app.db
