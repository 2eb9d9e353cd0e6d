#!/bin/bash
# Verifier for git-recover-branch. Runs as root in a fresh copy of the
# task's environment holding the agent's /workspace; git runs as the agent's
# uid (10001), the repository's owner. Reward 1 only if every check passes.
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
git() { as_agent env GIT_CONFIG_NOSYSTEM=1 git "$@"; }

# The commit ids make-repo.sh's fixed authors and dates give.
MAIN=31a8fbb6a07d38798b0d990c49e51898cd45bff0
FEATURE=c7f24f14520c497d29dd670f00456b2c028c8bdf

cd /workspace/inventory || fail "/workspace/inventory is missing"
out=$(git fsck --full --strict 2>&1) || fail "git fsck failed: $out"
if echo "$out" | grep -Eiq 'error|broken|missing|corrupt'; then fail "git fsck reports: $out"; fi
[ "$(git symbolic-ref HEAD 2>&1)" = refs/heads/main ] || fail "HEAD is not main"
[ "$(git rev-parse --verify -q refs/heads/main)" = "$MAIN" ] || fail "main has moved"
[ "$(git rev-parse --verify -q refs/heads/feature/csv-export)" = "$FEATURE" ] \
    || fail "feature/csv-export is not at its original last commit"
status=$(git status --porcelain 2>&1) || fail "git status failed: $status"
[ -z "$status" ] || fail "the working tree or index is not clean: $status"
git diff --quiet HEAD -- || fail "the working tree differs from main"
[ "$(git log --format=%s "$FEATURE" | wc -l)" = 4 ] || fail "the feature branch's history is incomplete"
out=$(git branch --list 2>&1)
if echo "$out" | grep -qi 'warning'; then fail "git branch still warns: $out"; fi

echo PASS
echo 1 > /logs/verifier/reward.txt
