#!/bin/bash
# Verifier for log-rotation. Runs as root in a fresh copy of the task's
# environment holding the agent's /workspace; rotate.sh and the service run
# as the agent's uid (10001), never as root. Reward 1 only if every check passes.
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

tool=/workspace/logrot/rotate.sh
[ -x "$tool" ] || fail "$tool is not executable"
head -1 "$tool" | grep -Eq '^#! ?(/usr)?/bin/(env )?bash' || fail "rotate.sh is no longer a bash script"
cd /tmp && python3 /tests/check.py "$tool" || exit 0

echo PASS
echo 1 > /logs/verifier/reward.txt
