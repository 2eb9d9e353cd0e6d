"""make-db.py DB MIGRATIONS: the production copy: migration 1, its data, and
what the failed run of migration 2 left behind (the audit table, user_version 1)."""

import sqlite3
import sys
from pathlib import Path

db, migrations = sys.argv[1], Path(sys.argv[2])
conn = sqlite3.connect(db)
conn.executescript((migrations / "1_init.sql").read_text())
conn.executemany(
    "INSERT INTO users (id, name) VALUES (?, ?)",
    [(1, "Ada"), (2, "Grace"), (3, "Linus"), (4, "Barbara")],
)
conn.executemany(
    "INSERT INTO orders (id, user_id, amount_cents) VALUES (?, ?, ?)",
    [(1, 1, 1250), (2, 1, 990), (3, 2, 15000), (4, 3, 42), (5, 4, 700), (6, 2, 1)],
)
conn.execute("PRAGMA user_version = 1")
conn.commit()
try:
    conn.executescript((migrations / "2_user_email.sql").read_text())
except sqlite3.OperationalError as exc:
    print("the failed run:", exc)
conn.close()
