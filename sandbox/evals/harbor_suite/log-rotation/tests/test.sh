#!/bin/bash
# Harbor verifier for log-rotation. Runs as root in a fresh copy of the task's
# environment holding the agent's /workspace; rotate.sh and the service run
# as the agent's uid (10001), never as root. Reward 1 only if every check passes.
set -u
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
chown -R 10001:10001 /workspace
chmod -R go-rwx /tests  # the agent's programs (uid 10001) cannot read the tests
as_agent() { setpriv --reuid=10001 --regid=10001 --clear-groups --reset-env -- "$@"; }
fail() { echo "FAIL: $*"; exit 0; }

tool=/workspace/logrot/rotate.sh
[ -x "$tool" ] || fail "$tool is not executable"
head -1 "$tool" | grep -Eq '^#! ?(/usr)?/bin/(env )?bash' || fail "rotate.sh is no longer a bash script"
cd /tmp && python3 /tests/check.py "$tool" || exit 0

echo PASS
echo 1 > /logs/verifier/reward.txt
