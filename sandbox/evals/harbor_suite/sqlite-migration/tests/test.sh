#!/bin/bash
# Verifier for sqlite-migration. Runs as root in a fresh copy of the
# task's environment holding the agent's /workspace; migrate.py runs as the
# agent's uid (10001), never as root. Reward 1 only if every check passes.
set -u
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
if [ "$(id -u)" = 0 ]; then  # Harbor: root, in a fresh container holding the agent's /workspace
    chown -R 10001:10001 /workspace
    chmod -R go-rwx /tests  # the agent's programs (uid 10001) cannot read the tests
    as_agent() { setpriv --reuid=10001 --regid=10001 --clear-groups --reset-env -- "$@"; }
    give() { chown -R 10001:10001 "$@"; }  # the verifier's files, to the agent's uid
else  # sandbox-platform: the judge uid, /tests unreadable to others; agent-run is the uid drop
    export TMPDIR=/tmp  # scratch the agent's uid can enter (the judge's own is /judge)
    as_agent() { agent-run "$@"; }
    give() { find "$@" -user "$(id -u)" -exec chmod a+rwX {} +; }  # the agent's are its own
fi
# put MODE SRC DEST: a file of the task's into the agent's tree, written as the agent.
put() { as_agent sh -c 'cat > "$2" && chmod "$1" "$2"' sh "$1" "$3" < "$2"; }
fail() { echo "FAIL: $*"; exit 0; }

app=/workspace/app
[ -f "$app/migrate.py" ] && [ -f "$app/app.db" ] || fail "migrate.py or app.db is missing"
scratch=$(mktemp -d /tmp/verify.XXXXXX)
cp -r "$app" "$scratch/app"
give "$scratch"
migrate() { (cd "$scratch" && as_agent timeout 60 python3 "$@" 2>&1); }

# The agent's app.db, migrated (again), and a new database.
out=$(migrate "$scratch/app/migrate.py" "$scratch/app/app.db") || fail "migrating app.db failed: $out"
python3 /tests/check_db.py "$scratch/app/app.db" --data || exit 0
out=$(migrate "$scratch/app/migrate.py" "$scratch/app/app.db") || fail "a second run failed: $out"
python3 /tests/check_db.py "$scratch/app/app.db" --data || exit 0
out=$(migrate "$scratch/app/migrate.py" "$scratch/new.db") || fail "migrating a new database failed: $out"
python3 /tests/check_db.py "$scratch/new.db" || exit 0

# A failing migration 11 must leave the database at version 10, untouched;
# once it is fixed, it applies exactly once.
cp "$scratch/new.db" "$scratch/before.db"
printf "CREATE TABLE t11 (x INTEGER);\nINSERT INTO audit (what) VALUES ('t11');\nINSERT INTO no_such_table VALUES (1);\n" \
    > "$scratch/app/migrations/11_broken.sql"
give "$scratch/app/migrations/11_broken.sql"
out=$(migrate "$scratch/app/migrate.py" "$scratch/new.db") && fail "a failing migration 11 exited 0: $out"
python3 /tests/check_db.py "$scratch/new.db" || exit 0
printf "CREATE TABLE t11 (x INTEGER);\nINSERT INTO audit (what) VALUES ('t11');\n" > "$scratch/app/migrations/11_broken.sql"
out=$(migrate "$scratch/app/migrate.py" "$scratch/new.db") || fail "a good migration 11 failed: $out"
python3 - "$scratch/new.db" <<'PY' || exit 0
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
if c.execute("PRAGMA user_version").fetchone()[0] != 11 or c.execute("SELECT count(*) FROM audit WHERE what = 't11'").fetchone()[0] != 1:
    print("FAIL: migration 11 was not applied exactly once after the fix")
    sys.exit(1)
PY

echo PASS
echo 1 > /logs/verifier/reward.txt
