#!/bin/bash
# Verifier for pip-offline-conflict. Runs as root in a fresh copy of the
# task's environment holding the agent's /workspace; the installed code and
# pip run as the agent's uid (10001), never as root. Reward 1 only if every
# check passes.
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

scratch=$(mktemp -d /tmp/verify.XXXXXX)
cp /tests/hidden.csv "$scratch/"
give "$scratch"
expected=$(cat /tests/hidden.expected)

run_report() {  # LIB: the report of hidden.csv from the stockreport installed in LIB
    (cd "$scratch" && as_agent env PYTHONPATH="$1" python3 -m stockreport "$scratch/hidden.csv" 2>&1)
}
out=$(run_report /workspace/lib) || fail "python3 -m stockreport failed: $out"
[ "$out" = "$expected" ] || fail "the report is wrong: $out"
out=$(cd "$scratch" && as_agent env PYTHONPATH=/workspace/lib /workspace/lib/bin/stockreport hidden.csv 2>&1)
[ "$out" = "$expected" ] || fail "/workspace/lib/bin/stockreport: $out"

# The project's metadata must install it again, on a fresh target.
cp -r /workspace/stockreport "$scratch/project"
rm -rf "$scratch/project/build" "$scratch/project"/*.egg-info
give "$scratch"
out=$(cd "$scratch" && as_agent python3 -m pip install --quiet --no-index --find-links /opt/wheels \
    --no-build-isolation --target "$scratch/fresh" "$scratch/project" 2>&1) || fail "a fresh install failed: $out"
out=$(run_report "$scratch/fresh") || fail "the fresh install does not run: $out"
[ "$out" = "$expected" ] || fail "the fresh install's report is wrong: $out"
if find "$scratch/project" -name '*.py' -path '*tabfmt*' | grep -q .; then fail "tabfmt is vendored into the project"; fi

python3 - "$scratch/fresh" /workspace/lib <<'PY' || exit 0
import sys
from importlib.metadata import distributions

for lib in sys.argv[1:]:
    versions = {d.metadata["Name"]: d.version for d in distributions(path=[lib])}
    if versions != {"stockreport": "0.3.0", "tabfmt": "1.3.0", "unitconv": "0.9.1"}:
        print(f"FAIL: {lib} holds {versions}")
        sys.exit(1)
PY

echo PASS
echo 1 > /logs/verifier/reward.txt
