#!/bin/bash
# Verifier for stream-under-memory. Runs as root in a fresh copy of the
# task's environment holding the agent's /workspace; summarize.py runs as the
# agent's uid (10001), never as root, under the job's address-space limit.
# Reward 1 only if every check passes.
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

script=/workspace/pipeline/summarize.py
[ -f "$script" ] || fail "$script is missing"
scratch=$(mktemp -d /tmp/verify.XXXXXX)
chmod 0755 "$scratch"

check() {  # NAME ROWS SEED
    python3 /tests/gen_events.py "$scratch/$1.csv" "$2" "$3"
    chmod 0644 "$scratch/$1.csv"
    python3 /tests/reference.py "$scratch/$1.csv" > "$scratch/$1.want"
    rm -f "$scratch/out.json"
    mkdir -p "$scratch/out" && give "$scratch/out"
    out=$(cd "$scratch/out" && as_agent sh -c 'ulimit -v 98304 && exec timeout 60 python3 "$1" "$2" "$3"' sh \
        "$script" "$scratch/$1.csv" "$scratch/out/$1.json" 2>&1) \
        || fail "summarize.py failed on $1 ($2 events) under ulimit -v 98304: $(echo "$out" | tail -3)"
    python3 - "$scratch/$1.want" "$scratch/out/$1.json" <<'PY' || exit 0
import json, sys
want = json.load(open(sys.argv[1]))
text = open(sys.argv[2], encoding="utf-8").read()
if text != json.dumps(want, indent=2, sort_keys=True) + "\n":
    print(f"FAIL: the summary differs from the expected one: {text[:400]!r}")
    sys.exit(1)
PY
}

check small 2000 11
check tiny 1 12
check export 1200000 13
check bigger 1800000 14

echo PASS
echo 1 > /logs/verifier/reward.txt
