#!/bin/bash
# Verifier for build-parallel-race. Runs as root in a fresh copy of the
# task's environment holding the agent's /workspace; the agent's build runs as
# the agent's uid (10001), never as root. Reward 1 only if every check passes.
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

cd /workspace/calc || fail "/workspace/calc is missing"
# Only the Makefile is the agent's: the sources and generator are the task's
# (the verifier's generator wraps the task's, logging when each run starts and ends).
put 0755 /tests/gen-table.sh tools/gen-table.sh
log=$(mktemp -d)/gen.log
give "$(dirname "$log")"
reset_log() { : > "$log"; give "$log"; }

check_binary() {
    [ "$(as_agent build/calc 2 3 + 4 '*')" = 20 ] || fail "build/calc 2 3 + 4 '*' does not print 20 ($1)"
    out=$(as_agent build/calc 1 0 / 2>&1) && fail "calc 1 0 / succeeded ($1)"
    [ "$out" = "calc: /: division by zero" ] || fail "calc 1 0 / printed '$out' ($1)"
    out=$(as_agent build/calc 1 x 2>&1)
    [ "$out" = "calc: x: unknown token" ] || fail "calc 1 x printed '$out' ($1)"
}

for jobs in 1 2 4 8 4 4 16; do
    as_agent make clean >/dev/null 2>&1
    reset_log
    out=$(as_agent env GEN_LOG="$log" timeout 120 make -j"$jobs" 2>&1) || fail "make -j$jobs failed:
$out"
    check_binary "after make -j$jobs"
    [ "$(grep -c '^start' "$log")" = 2 ] || fail "make -j$jobs did not run the table generator once per table"
    if [ "$jobs" -ge 4 ]; then
        # With 4 job slots or more, the second generator starts before the first one ends.
        first_end=$(awk '$1 == "end" { print $3; exit }' "$log")
        last_start=$(awk '$1 == "start" { t = $3 } END { print t }' "$log")
        awk -v s="$last_start" -v e="$first_end" 'BEGIN { exit !(s < e) }' \
            || fail "under make -j$jobs the two table generators did not run at the same time"
    fi
done

reset_log
out=$(as_agent env GEN_LOG="$log" make -j4 2>&1) || fail "a second make failed: $out"
[ ! -s "$log" ] || fail "a second make re-ran the generator"
if echo "$out" | grep -Eq '(^| )(cc|gcc) '; then fail "a second make recompiled: $out"; fi
check_binary "after a second make"

echo PASS
echo 1 > /logs/verifier/reward.txt
