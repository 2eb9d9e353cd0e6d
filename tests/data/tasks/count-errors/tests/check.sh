# The hidden check: exit 0 only for the right count (3 lines hold ERROR). The agent's
# file is read as the sandbox uid (agent-run), the workspace being closed to the judge.
set -eu
test "$(agent-run cat count.txt)" = "3"
