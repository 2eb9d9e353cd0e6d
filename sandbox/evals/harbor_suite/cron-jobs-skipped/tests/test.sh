#!/bin/bash
# Verifier for cron-jobs-skipped. Runs as root in a fresh copy of the
# task's environment holding the agent's /workspace; the jobs run as the
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

cron=/workspace/cron
[ -d "$cron/daily" ] || fail "$cron/daily is missing"
# run-daily is the scheduler's; the state is a fresh one the agent never saw.
put 0755 /opt/cron/run-daily "$cron/run-daily"
new=$(mktemp -d)/state
mkdir -p "$new/data/sub" "$new/cache"
printf 'one\n' > "$new/data/one.txt"
printf 'two\n' > "$new/data/with space.txt"
printf 'old\n' > "$new/data/one.txt.bak"
printf 'edit\n' > "$new/data/sub/notes~"
printf 'lock\n' > "$new/data/sub/.#notes"
printf 'keep\n' > "$new/data/sub/keep.bak.txt"
printf 't\n' > "$new/cache/a.tmp"
printf 't\n' > "$new/cache/b.tmp"
printf 'keep\n' > "$new/cache/index"
give "$(dirname "$new")"
as_agent rm -rf "$cron/state"
as_agent cp -r "$new" "$cron/state"

jobs=$(as_agent run-parts --test "$cron/daily" | xargs -n1 basename | tr '\n' ' ')
[ "$jobs" = "10-rotate-cache 20-backup 30-report 40-cleanup " ] || fail "run-parts would run: $jobs"
out=$(cd / && as_agent env -i "$cron/run-daily" 2>&1) || fail "run-daily failed: $out"
[ -z "$out" ] || fail "run-daily reported: $out"

s=$cron/state
[ "$(cat "$s/cache.done" 2>/dev/null)" = "cache rotated" ] || fail "10-rotate-cache did not run"
[ -z "$(find "$s/cache" -name '*.tmp')" ] || fail "the cache still has .tmp files"
[ -f "$s/cache/index" ] || fail "10-rotate-cache removed more than .tmp files"
[ -f "$s/backup/data/one.txt.bak" ] && [ -f "$s/backup/data/with space.txt" ] && [ -f "$s/backup/data/sub/notes~" ] \
    || fail "20-backup did not copy the data (before the cleanup)"
[ "$(cat "$s/report.txt" 2>/dev/null)" = "files: 6" ] || fail "30-report wrote: $(cat "$s/report.txt" 2>&1)"
[ "$(cat "$s/cleanup.done" 2>/dev/null)" = "cleanup done" ] || fail "40-cleanup did not finish"
left=$(cd "$s/data" && find . -type f | sort | tr '\n' ' ')
[ "$left" = "./one.txt ./sub/keep.bak.txt ./with space.txt " ] || fail "after the cleanup data/ holds: $left"

echo PASS
echo 1 > /logs/verifier/reward.txt
