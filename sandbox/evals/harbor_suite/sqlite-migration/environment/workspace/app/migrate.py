"""migrate.py DB: applies the pending migrations in migrations/ to the SQLite file DB.

A migration is migrations/<N>_<name>.sql; the database's PRAGMA user_version
is the number of the last migration applied.
"""

import sqlite3
import sys
from pathlib import Path

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def main() -> None:
    conn = sqlite3.connect(sys.argv[1])
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    for path in sorted(MIGRATIONS.glob("*.sql")):
        version = int(path.name.split("_", 1)[0])
        if version <= current:
            continue
        print(f"applying {path.name}")
        conn.executescript(path.read_text())
        conn.execute(f"PRAGMA user_version = {version}")
        conn.commit()
    conn.close()


if __name__ == "__main__":
    main()
