#!/bin/bash
# Harbor verifier for cron-jobs-skipped. Runs as root in a fresh copy of the
# task's environment holding the agent's /workspace; the jobs run as the
# agent's uid (10001), never as root. Reward 1 only if every check passes.
set -u
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
chown -R 10001:10001 /workspace
chmod -R go-rwx /tests  # the agent's programs (uid 10001) cannot read the tests
as_agent() { setpriv --reuid=10001 --regid=10001 --clear-groups --reset-env -- "$@"; }
fail() { echo "FAIL: $*"; exit 0; }

cron=/workspace/cron
[ -d "$cron/daily" ] || fail "$cron/daily is missing"
# run-daily is the scheduler's; the state is a fresh one the agent never saw.
install -o 10001 -g 10001 -m 0755 /opt/cron/run-daily "$cron/run-daily"
rm -rf "$cron/state"
mkdir -p "$cron/state/data/sub" "$cron/state/cache"
printf 'one\n' > "$cron/state/data/one.txt"
printf 'two\n' > "$cron/state/data/with space.txt"
printf 'old\n' > "$cron/state/data/one.txt.bak"
printf 'edit\n' > "$cron/state/data/sub/notes~"
printf 'lock\n' > "$cron/state/data/sub/.#notes"
printf 'keep\n' > "$cron/state/data/sub/keep.bak.txt"
printf 't\n' > "$cron/state/cache/a.tmp"
printf 't\n' > "$cron/state/cache/b.tmp"
printf 'keep\n' > "$cron/state/cache/index"
chown -R 10001:10001 "$cron/state"

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
