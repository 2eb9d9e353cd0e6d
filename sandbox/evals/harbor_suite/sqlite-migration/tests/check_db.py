"""check_db.py DB [--data]: DB has the final schema (version 10) and audit rows,
and with --data the production users and orders."""

import sqlite3
import sys

db, with_data = sys.argv[1], "--data" in sys.argv[2:]
# A copy in memory: the checks below try writes (rolled back), and DB is the agent's file.
conn = sqlite3.connect(":memory:")
source = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
source.backup(conn)
source.close()


def fail(msg: str) -> None:
    print(f"FAIL: {db}: {msg}")
    sys.exit(1)


def columns(table: str) -> list[tuple]:
    return [(r[1], r[2].upper(), r[3], r[5]) for r in conn.execute(f"PRAGMA table_info({table})")]


if conn.execute("PRAGMA user_version").fetchone()[0] != 10:
    fail(f"user_version is {conn.execute('PRAGMA user_version').fetchone()[0]}, not 10")
want = {
    "users": [("id", "INTEGER", 0, 1), ("name", "TEXT", 1, 0), ("email", "TEXT", 1, 0)],
    "orders": [
        ("id", "INTEGER", 0, 1),
        ("user_id", "INTEGER", 1, 0),
        ("amount_cents", "INTEGER", 1, 0),
        ("currency", "TEXT", 1, 0),
    ],
    "audit": [("id", "INTEGER", 0, 1), ("at", "TEXT", 1, 0), ("what", "TEXT", 1, 0)],
}
objects = dict(conn.execute("SELECT name, type FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))
if objects != {
    "users": "table",
    "orders": "table",
    "audit": "table",
    "users_email": "index",
    "user_totals": "view",
}:
    fail(f"holds {objects}")
for table, cols in want.items():
    if columns(table) != cols:
        fail(f"{table} has columns {columns(table)}")
audit = [r[0] for r in conn.execute("SELECT what FROM audit ORDER BY id")]
if audit != ["users.email added", "orders.currency added", "user_totals view"]:
    fail(f"audit rows {audit}")
conn.execute("INSERT INTO users (id, name, email) VALUES (100, 'T', 't@x')")
try:
    conn.execute("INSERT INTO users (id, name, email) VALUES (101, 'U', 't@x')")
    fail("two users may share an email")
except sqlite3.IntegrityError:
    pass
try:
    conn.execute("INSERT INTO users (id, name) VALUES (102, NULL)")
    fail("a user may have no name")
except sqlite3.IntegrityError:
    pass
conn.rollback()
if with_data:
    users = conn.execute("SELECT id, name, email FROM users ORDER BY id").fetchall()
    if users != [(1, "Ada", ""), (2, "Grace", ""), (3, "Linus", ""), (4, "Barbara", "")]:
        fail(f"users are {users}")
    orders = conn.execute(
        "SELECT id, user_id, amount_cents, currency FROM orders ORDER BY id"
    ).fetchall()
    if orders != [
        (1, 1, 1250, "EUR"),
        (2, 1, 990, "EUR"),
        (3, 2, 15000, "EUR"),
        (4, 3, 42, "EUR"),
        (5, 4, 700, "EUR"),
        (6, 2, 1, "EUR"),
    ]:
        fail(f"orders are {orders}")
    totals = conn.execute(
        "SELECT id, name, currency, total_cents FROM user_totals ORDER BY id"
    ).fetchall()
    if totals != [
        (1, "Ada", "EUR", 2240),
        (2, "Grace", "EUR", 15001),
        (3, "Linus", "EUR", 42),
        (4, "Barbara", "EUR", 700),
    ]:
        fail(f"user_totals is {totals}")
